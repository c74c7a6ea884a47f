"""kimi-bench's vLLM K3 path (kimi_bench.domain.vllm_k3) against vLLM 0.33's own code, bit
for bit (torch.equal / np.array_equal on uint8): the decoded RGB image, the uint8 patches
and the grid, on the built-in corpus's images and on EXIF-rotated and transparent files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kimi_bench.domain import vllm_k3
from kimi_bench.domain.config import get_preset
from kimi_bench.vllm_ref import Reference
from tests.vllm_inputs import encoded_inputs

pytestmark = pytest.mark.vllm
# outside the vLLM environment, skip before the inputs are encoded (collection stays cheap)
pytest.importorskip("vllm", reason="vLLM is not installed (scripts/vllm-env.sh builds it)")

INPUTS = encoded_inputs()


@pytest.mark.parametrize("preset", ["kimi-k3", "kimi-k2.5"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_patches_are_bit_identical_to_vllms(ref: Reference, name: str, preset: str) -> None:
    data, cfg = INPUTS[name], get_preset(preset)
    ours = vllm_k3.decode(data)
    assert np.array_equal(np.asarray(ours.image), np.asarray(ref.decode(data))), name
    patches = vllm_k3.preprocess(ours, cfg)
    want, grid = ref.patches(data, cfg)
    assert want.dtype == torch.uint8 and patches.patches.dtype == torch.uint8
    assert torch.equal(patches.patches, want), name
    assert tuple(grid[0].tolist()) == patches.grid_thw


def test_the_reference_is_the_version_copied(ref: Reference) -> None:
    assert ref.version == vllm_k3.VLLM_VERSION
