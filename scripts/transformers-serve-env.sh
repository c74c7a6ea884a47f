#!/usr/bin/env bash
# Build the third-party server environment of tests/thirdparty (issue 32): a virtual
# environment with torch and `transformers serve` (transformers[serving], pinned), in which
# the test makes a tiny random LLaVA and serves it on the CPU. kimi-bench is NOT installed
# here: the test runs in kimi-bench's own environment and finds this one through
# KB_TRANSFORMERS_SERVE=VENV_DIR/bin/transformers.
#
#   scripts/transformers-serve-env.sh VENV_DIR
#
# Steps, each bounded by TRANSFORMERS_ENV_STEP_TIMEOUT seconds (default 900):
#   1. python -m venv --clear VENV_DIR
#   2. torch (TORCH_SPEC, default torch==2.13.0; set TORCH_INDEX_URL to pick a wheel index,
#      e.g. https://download.pytorch.org/whl/cpu for the CPU build, or leave it unset to
#      use pip's own configuration; an unpinned torch may pull a multi-GB CUDA build)
#   3. requirements-transformers-serve.txt (transformers[serving]==5.23.0, pillow, pins)
#   4. check: `transformers serve --help` answers and the tiny model's classes import
#
# The environment lives outside the repository (a venv is never committed); a path inside
# the checkout is refused unless git ignores it.
set -euo pipefail

usage() { echo "usage: $0 VENV_DIR" >&2; exit 2; }
[[ $# -eq 1 ]] || usage
VENV=$1
PYTHON=${PYTHON:-python3}
STEP_TIMEOUT=${TRANSFORMERS_ENV_STEP_TIMEOUT:-900}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
REPO=$(cd "$(dirname "$0")/.." && pwd)
REQS="$REPO/requirements-transformers-serve.txt"

NAME=transformers-serve-env
# shellcheck source=lib/venv-steps.sh
. "$REPO/scripts/lib/venv-steps.sh"

[[ -f "$REQS" ]] || die "missing $REQS"
venv_with_torch 10
step "transformers[serving] and pins" "${PIP[@]}" install -r "$REQS" "$TORCH_SPEC"
step "check" bash -ec '
"$1/bin/transformers" serve --help >/dev/null
"$1/bin/python" -c "
import PIL, transformers
from transformers import CLIPImageProcessor, LlavaForConditionalGeneration, LlavaProcessor
print(f\"transformers {transformers.__version__} (serve), pillow {PIL.__version__}\")
"' check "$VENV"
ready
