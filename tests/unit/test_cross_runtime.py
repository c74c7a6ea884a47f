"""The cross-runtime view (bench.cross_runtime): vLLM 0.33's K3 features against SGLang's
for the same bytes. The rules that make them differ by design are asserted one by one."""

from __future__ import annotations

from io import BytesIO

import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.bench.cross_runtime import compare_runtimes, difference
from kimi_bench.domain.config import get_preset
from tests.vllm_inputs import exif_jpeg, transparent_png

K3 = get_preset("kimi-k3")


def _png(pixels: np.ndarray, mode: str = "RGB") -> bytes:
    buf = BytesIO()
    Image.fromarray(pixels, mode).save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize(("orientation", "swapped"), [(6, True), (8, True), (3, False)])
def test_an_exif_rotated_photo_changes_vllms_grid_but_not_its_token_count(
    orientation: int, swapped: bool
) -> None:
    row = compare_runtimes("rot", exif_jpeg(1000, 290, orientation), K3)
    assert row.exif_rotated and row.stored_size == (1000, 290)
    assert row.sglang_grid == (1, 22, 72)  # 1000x290 padded to 1008x308, in 14 px patches
    assert row.vllm_grid == ((1, 72, 22) if swapped else (1, 22, 72))
    assert row.vllm_size == ((290, 1000) if swapped else (1000, 290))
    # the NaViT plan is symmetric in width and height: 36 x 11 = 396 tokens either way
    assert row.sglang_tokens == row.vllm_tokens == 396 and not row.tokens_differ
    assert row.vllm_vs_sglang.same_shape and row.vllm_vs_sglang.differing > 0


def test_at_its_plan_size_only_the_normalisation_arithmetic_differs() -> None:
    # 448x448 needs no resize (a multiple of 28 under every limit): both runtimes normalise
    # the same uint8 values, SGLang's way against vLLM's x * (1/255/std) + (-mean/std) in
    # FP32; the two FP32 results round to different BF16 values for a few inputs only, by
    # one BF16 step of a value near zero at most
    pixels = np.random.default_rng(0).integers(0, 256, (448, 448, 3), dtype=np.uint8)
    row = compare_runtimes("mult28", _png(pixels), K3)
    assert not row.tokens_differ and not row.exif_rotated and not row.composited_white
    d = row.vllm_vs_sglang
    assert d.same_shape and 0 < d.differing < d.total // 100 and d.max_abs < 1e-4, d
    assert row.sglang_vs_pil_reference.identical  # no resize: the PIL reference agrees


def test_a_resized_image_differs_by_the_bicubic_kernel_not_by_the_plan() -> None:
    pixels = np.random.default_rng(1).integers(0, 256, (1024, 1536, 3), dtype=np.uint8)
    row = compare_runtimes("resized", _png(pixels), K3)
    assert not row.tokens_differ and row.vllm_vs_sglang.same_shape
    assert row.vllm_vs_sglang.differing > 0  # PIL's uint8 bicubic vs torch's float one


def test_transparency_is_white_in_vllm_and_the_checkpoints_background_in_sglang() -> None:
    row = compare_runtimes("rgba", transparent_png(448, 448), K3)
    assert row.composited_white and row.vllm_vs_sglang.same_shape
    assert row.vllm_vs_sglang.differing > 0


def test_difference_counts_values_and_flags_shapes() -> None:
    a = torch.zeros(2, 3, dtype=torch.bfloat16)
    b = a.clone()
    b[0, 1] = 0.5
    d = difference(a, b)
    assert (d.same_shape, d.differing, d.total, d.max_abs) == (True, 1, 6, 0.5)
    assert not difference(a, torch.zeros(3, 3)).same_shape
    with pytest.raises(ValueError):
        compare_runtimes("junk", b"not an image", K3)
