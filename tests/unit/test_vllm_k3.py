"""kimi-bench's copy of vLLM 0.33's K3 image path (kimi_bench.domain.vllm_k3), without vLLM:
the patch layout against an independent per-pixel formulation, the EXIF and transparency
rules, the plan and the worker's normalisation. Against vLLM's own code: tests/vllm."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kimi_bench.domain import vllm_k3
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.navit import plan_resize
from tests.vllm_inputs import exif_jpeg, transparent_png

K3 = get_preset("kimi-k3")


@pytest.mark.parametrize(("w", "h"), [(1, 1), (57, 29), (448, 448), (1536, 1024)])
def test_patchify_puts_each_pixel_where_the_fused_writer_does(w: int, h: int) -> None:
    plan = plan_resize(w, h, K3)
    pixels = np.random.default_rng(w * h).integers(
        0, 256, (plan.new_height, plan.new_width, 3), dtype=np.uint8
    )
    out = vllm_k3.patchify(pixels, plan).numpy()
    p, pw = plan.patch_size, plan.padded_width // plan.patch_size
    assert out.shape == (plan.num_patches, 3, p, p) and out.dtype == np.uint8
    ys, xs = np.meshgrid(np.arange(plan.padded_height), np.arange(plan.padded_width), indexing="ij")
    for c in range(3):
        got = out[(ys // p) * pw + xs // p, c, ys % p, xs % p]
        want = np.zeros((plan.padded_height, plan.padded_width), dtype=np.uint8)
        want[: plan.new_height, : plan.new_width] = pixels[..., c]
        assert np.array_equal(got, want)


def test_a_1536x1024_k3_image_is_8140_uint8_patches_of_19_1_mb_per_4() -> None:
    decoded = vllm_k3.Decoded(vllm_k3.Image.new("RGB", (1536, 1024)), (1536, 1024), False, False)
    patches = vllm_k3.preprocess(decoded, K3)
    assert patches.grid_thw == (1, 74, 110)
    assert vllm_k3.encoded_item_bytes(patches) == 4_786_320  # SPEC section 13


@pytest.mark.parametrize(("orientation", "swapped"), [(1, False), (3, False), (6, True), (8, True)])
def test_the_exif_orientation_is_applied_and_can_swap_width_and_height(
    orientation: int, swapped: bool
) -> None:
    decoded = vllm_k3.decode(exif_jpeg(640, 480, orientation))
    assert decoded.stored_size == (640, 480)
    assert decoded.image.size == ((480, 640) if swapped else (640, 480))
    assert decoded.exif_rotated is (orientation != 1)
    assert decoded.image.mode == "RGB" and not decoded.composited


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_transparency_is_filled_with_white_before_the_resize(mode: str) -> None:
    decoded = vllm_k3.decode(transparent_png(120, 90, mode))
    assert decoded.composited and decoded.image.mode == "RGB"
    if mode == "RGBA":  # the top half was fully transparent
        top = np.asarray(decoded.image)[:45]
        assert (top == 255).all()


def test_bytes_pil_cannot_open_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="vLLM would refuse this image"):
        vllm_k3.decode(b"not an image at all")


def test_the_workers_normalisation_maps_0_and_255_to_minus_1_and_1_in_bf16() -> None:
    patches = (
        torch.tensor([0, 255, 128], dtype=torch.uint8)
        .repeat(196 * 3 // 3 * 3)[: 3 * 196]
        .reshape(1, 3, 14, 14)
    )
    out = vllm_k3.normalize_bf16(patches, K3)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 3 * 196)
    flat = patches.reshape(-1)
    assert torch.equal(out[0][flat == 0], torch.full_like(out[0][flat == 0], -1.0))
    assert torch.equal(out[0][flat == 255], torch.full_like(out[0][flat == 255], 1.0))
