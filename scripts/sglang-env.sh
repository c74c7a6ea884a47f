#!/usr/bin/env bash
# Build the reference environment for `--reference sglang`: a virtual environment with
# torch, kimi-bench (editable, from this checkout) and the SGLang runtime's own code.
#
#   scripts/sglang-env.sh VENV_DIR
#
# Steps, each bounded by SGLANG_ENV_STEP_TIMEOUT seconds (default 900):
#   1. python -m venv --clear VENV_DIR
#   2. torch (TORCH_SPEC, default torch==2.13.0; set TORCH_INDEX_URL to pick a wheel index,
#      e.g. https://download.pytorch.org/whl/cpu for the CPU build, or leave it unset to
#      use pip's own configuration; on a GPU host install the CUDA torch you serve with)
#   3. kimi-bench itself with the photo corpus: pip install -e "<checkout>[photos,plot]"
#   4. requirements-sglang.txt with --no-deps (sglang pinned; see the file for why)
#   5. pytest and pytest-xdist (the `sglang` test marker runs in this environment; the
#      suite's addopts run it in parallel)
#   6. check: the runtime's modules import and kimi_bench.sglang_ref finds every function
#
# The environment lives outside the repository (a venv is never committed); a path inside
# the checkout is refused unless git ignores it.
set -euo pipefail

usage() { echo "usage: $0 VENV_DIR" >&2; exit 2; }
[[ $# -eq 1 ]] || usage
VENV=$1
PYTHON=${PYTHON:-python3}
STEP_TIMEOUT=${SGLANG_ENV_STEP_TIMEOUT:-900}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
PYTEST_SPEC=${PYTEST_SPEC:-pytest==9.2.0}
XDIST_SPEC=${XDIST_SPEC:-pytest-xdist==3.8.0}
REPO=$(cd "$(dirname "$0")/.." && pwd)
REQS="$REPO/requirements-sglang.txt"

NAME=sglang-env
# shellcheck source=lib/venv-steps.sh
. "$REPO/scripts/lib/venv-steps.sh"

[[ -f "$REQS" ]] || die "missing $REQS"
venv_with_torch 11
step "kimi-bench (-e $REPO[photos,plot])" "${PIP[@]}" install -e "$REPO[photos,plot]"
step "sglang and its light imports (--no-deps)" "${PIP[@]}" install --no-deps -r "$REQS"
step "test runner ($PYTEST_SPEC, $XDIST_SPEC)" "${PIP[@]}" install "$PYTEST_SPEC" "$XDIST_SPEC"
step "check" "$VENV/bin/python" -c '
from kimi_bench import sglang_ref
rt = sglang_ref.load_runtime()
print(f"sglang {rt.version}: reference functions found")
'
ready
