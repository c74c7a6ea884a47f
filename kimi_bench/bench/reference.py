"""An independent reference: the checkpoint processor's own approach (PIL BICUBIC resize,
then composite, pad, normalize, patchify). Not expected to be bit-identical to the torch
materializer; parity reports the max absolute difference against it."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.materialize import pad_normalize_patchify
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.pixels import composite_alpha, normalization_tensors, stage_input


def _as_pil(chw: torch.Tensor) -> Image.Image:
    arr = chw.permute(1, 2, 0).contiguous().numpy()
    h, w, c = arr.shape
    return Image.frombytes("RGBA" if c == 4 else "RGB", (w, h), arr.tobytes())


def pil_reference(obj: Any, plan: ResizePlan, cfg: PreprocessConfig) -> torch.Tensor | None:
    """FP32 patches computed with PIL's resize, or None for non-uint8 inputs."""
    if isinstance(obj, torch.Tensor) and obj.dtype != torch.uint8:
        return None
    chw = stage_input(obj, cfg, require_uint8=True)
    img = _as_pil(chw)
    if plan.needs_resize:
        img = img.resize((plan.new_width, plan.new_height), Image.Resampling.BICUBIC)
    arr = np.asarray(img)
    x = torch.from_numpy(arr.copy()).permute(2, 0, 1).unsqueeze(0).to(torch.float32)
    x = composite_alpha(x, cfg.transparent_bg)
    scale, bias = normalization_tensors(cfg)
    return pad_normalize_patchify(x, plan, scale, bias)


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
