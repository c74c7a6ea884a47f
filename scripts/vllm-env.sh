#!/usr/bin/env bash
# Build the reference environment for `--reference vllm`: a virtual environment with torch,
# kimi-bench (editable, from this checkout) and vLLM 0.33's own K3 image-path code.
#
#   scripts/vllm-env.sh VENV_DIR
#
# Steps, each bounded by VLLM_ENV_STEP_TIMEOUT seconds (default 900):
#   1. python -m venv --clear VENV_DIR
#   2. torch (TORCH_SPEC, default torch==2.13.0; TORCH_INDEX_URL as for scripts/sglang-env.sh)
#   3. kimi-bench itself: pip install -e "<checkout>[photos,plot]"
#   4. requirements-vllm.txt with --no-deps (vllm pinned; see the file for why)
#   5. pytest and pytest-xdist (the `vllm` test marker runs in this environment)
#   6. check: vLLM's fused K3 processor turns a 1536x1024 RGB image into uint8 patches of
#      the shape its NaViT plan gives (74 x 110 patches of 3 x 14 x 14)
#
# The environment lives outside the repository; a path inside the checkout is refused
# unless git ignores it.
set -euo pipefail

usage() { echo "usage: $0 VENV_DIR" >&2; exit 2; }
[[ $# -eq 1 ]] || usage
VENV=$1
PYTHON=${PYTHON:-python3}
STEP_TIMEOUT=${VLLM_ENV_STEP_TIMEOUT:-900}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
PYTEST_SPEC=${PYTEST_SPEC:-pytest==9.2.0}
XDIST_SPEC=${XDIST_SPEC:-pytest-xdist==3.8.0}
REPO=$(cd "$(dirname "$0")/.." && pwd)
REQS="$REPO/requirements-vllm.txt"

NAME=vllm-env
# shellcheck source=lib/venv-steps.sh
. "$REPO/scripts/lib/venv-steps.sh"

[[ -f "$REQS" ]] || die "missing $REQS"
venv_with_torch 11
step "kimi-bench (-e $REPO[photos,plot])" "${PIP[@]}" install -e "$REPO[photos,plot]"
step "vllm and its light imports (--no-deps)" "${PIP[@]}" install --no-deps -r "$REQS"
step "test runner ($PYTEST_SPEC, $XDIST_SPEC)" "${PIP[@]}" install "$PYTEST_SPEC" "$XDIST_SPEC"
step "check" "$VENV/bin/python" -c '
import numpy as np
from PIL import Image
from vllm.transformers_utils.processors.kimi_k25_vision_fused import (
    KimiK25FusedVisionProcessor,
)
cfg = dict(merge_kernel_size=2, patch_size=14, in_patch_limit=16384,
           patch_limit_on_one_side=512, fixed_output_tokens=None,
           temporal_merge_kernel_size=4, image_mean=[0.5] * 3, image_std=[0.5] * 3)
image = Image.fromarray(np.zeros((1024, 1536, 3), dtype=np.uint8))
out = KimiK25FusedVisionProcessor(cfg).preprocess(
    [{"type": "image", "image": image}], do_rescale=False, do_normalize=False)
assert tuple(out["pixel_values"].shape) == (8140, 3, 14, 14), out["pixel_values"].shape
assert str(out["pixel_values"].dtype) == "torch.uint8"
print("vllm 0.33.0: KimiK25FusedVisionProcessor gives uint8 patches (8140, 3, 14, 14)")
'
ready
