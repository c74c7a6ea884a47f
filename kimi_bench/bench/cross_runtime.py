"""Where vLLM 0.33's Kimi-K3 pixels differ from SGLang's, per input (issue 47's view).

For one encoded image, three BF16 feature sets of ``(P, 3, 14, 14)``:

- SGLang's K3 path as kimi-bench emulates it (PIL decode without EXIF orientation, staging
  with alpha kept, torch's float bicubic with antialias, the checkpoint's background after
  the resize, normalise, patchify; ``domain.materialize``), cast to BF16 as the tower does;
- vLLM's (``domain.vllm_k3``: EXIF orientation applied, white under transparency before the
  resize, PIL's uint8 bicubic, uint8 patches normalised on the worker);
- the checkpoint's PIL reference (``bench.reference.pil_reference``), cast to BF16.

Each row says whether the grids and token counts differ and, where the shapes agree, how
many BF16 values differ and by how much. The NaViT plan is symmetric in width and height,
so an EXIF rotation by 90 degrees swaps vLLM's grid but keeps its token count.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO

import torch
from PIL import Image

from kimi_bench.bench.reference import max_abs_diff, pil_reference
from kimi_bench.domain import vllm_k3
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.materialize import materialize
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.pixels import stage_input


@dataclass(frozen=True)
class Difference:
    """BF16 values of one runtime against another's for the same input."""

    same_shape: bool
    differing: int  # BF16 values that differ (every value when the shapes differ)
    total: int
    max_abs: float  # inf when the shapes differ

    @property
    def identical(self) -> bool:
        return self.same_shape and self.differing == 0


@dataclass(frozen=True)
class CrossRuntimeRow:
    name: str
    stored_size: tuple[int, int]  # width, height as stored in the file
    vllm_size: tuple[int, int]  # after vLLM's EXIF orientation
    sglang_grid: tuple[int, int, int]  # (t, h, w) in patches
    vllm_grid: tuple[int, int, int]
    sglang_tokens: int
    vllm_tokens: int
    exif_rotated: bool
    composited_white: bool
    vllm_vs_sglang: Difference
    vllm_vs_pil_reference: Difference
    sglang_vs_pil_reference: Difference

    @property
    def tokens_differ(self) -> bool:
        return self.sglang_tokens != self.vllm_tokens


def difference(a: torch.Tensor, b: torch.Tensor) -> Difference:
    if a.shape != b.shape:
        return Difference(False, max(a.numel(), b.numel()), max(a.numel(), b.numel()), float("inf"))
    differing = int((a != b).sum())
    return Difference(True, differing, a.numel(), max_abs_diff(a, b))


def sglang_bf16(image: Image.Image, cfg: PreprocessConfig) -> torch.Tensor:
    """SGLang's K3 features of a PIL-decoded image, BF16 ``(P, 3, p, p)``."""
    chw = stage_input(image, cfg)
    plan = plan_resize(image.width, image.height, cfg)
    return materialize([chw], [plan], cfg).pixel_values.to(torch.bfloat16)


def vllm_bf16(patches: vllm_k3.Patches, cfg: PreprocessConfig) -> torch.Tensor:
    p = patches.plan.patch_size
    return vllm_k3.normalize_bf16(patches.patches, cfg).reshape(-1, 3, p, p)


def compare_runtimes(name: str, data: bytes, cfg: PreprocessConfig) -> CrossRuntimeRow:
    """One input's row (ValueError when vLLM or PIL cannot open the bytes)."""
    decoded = vllm_k3.decode(data)  # first: ValueError naming why vLLM would refuse it
    with Image.open(BytesIO(data)) as opened:
        opened.load()
        image = opened.copy()
    ours = vllm_k3.preprocess(decoded, cfg)
    sglang = sglang_bf16(image, cfg)
    vllm = vllm_bf16(ours, cfg)
    plan = plan_resize(image.width, image.height, cfg)
    reference = pil_reference(image, plan, cfg)
    ref = reference.to(torch.bfloat16) if reference is not None else torch.empty(0)
    return CrossRuntimeRow(
        name=name,
        stored_size=decoded.stored_size,
        vllm_size=decoded.image.size,
        sglang_grid=plan.grid_thw,
        vllm_grid=ours.plan.grid_thw,
        sglang_tokens=plan.num_tokens,
        vllm_tokens=ours.plan.num_tokens,
        exif_rotated=decoded.exif_rotated,
        composited_white=decoded.composited,
        vllm_vs_sglang=difference(vllm, sglang),
        vllm_vs_pil_reference=difference(vllm, ref),
        sglang_vs_pil_reference=difference(sglang, ref),
    )
