"""Pixels before materialization: staging inputs as CHW uint8, the transparent background,
and the normalization tensors (SPEC sections 4 and 5)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from kimi_bench.domain.config import BackgroundConfig, PreprocessConfig
from kimi_bench.domain.device_image import DeviceImage

PATTERN_VALUES = {"white": 255.0, "black": 0.0, "gray": 128.0}


class StagingError(ValueError):
    """An input that cannot be staged as a CHW tensor (bad dtype, layout or PIL mode)."""


def pil_has_alpha(img: Image.Image) -> bool:
    """The runtime's rule: not RGB, and an ``A`` band or a ``transparency`` entry."""
    return img.mode != "RGB" and ("A" in img.getbands() or "transparency" in img.info)


def pil_target_mode(img: Image.Image, cfg: PreprocessConfig) -> str:
    """RGBA when the preset composites a background and the image has alpha, else RGB."""
    return "RGBA" if cfg.transparent_bg is not None and pil_has_alpha(img) else "RGB"


def pil_to_hwc_array(img: Image.Image, cfg: PreprocessConfig) -> np.ndarray:
    """What the runtime's ``to_chw_uint8`` does first: ``image.convert(mode)`` (a new image
    buffer, also when the mode is unchanged) and ``np.array(..., copy=True)`` (HWC uint8).
    Two host copies of the raw bytes; the CHW tensor is then a permuted view of this array."""
    target = pil_target_mode(img, cfg)
    try:
        arr = np.array(img.convert(target), copy=True)
    except (ValueError, OSError) as exc:
        raise StagingError(f"cannot convert PIL mode {img.mode!r} to {target}: {exc}") from exc
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != len(target):
        raise StagingError(f"PIL mode {img.mode!r} did not decode to 8-bit {target}")
    return arr


def pil_to_chw_uint8(img: Image.Image, cfg: PreprocessConfig) -> torch.Tensor:
    """A contiguous CHW uint8 tensor (3 or 4 channels) of a PIL image.

    Presets without a background config (K2.5) convert every image to RGB; with one (K3),
    images that have alpha keep it as a 4th channel for compositing after the resize.
    """
    return torch.from_numpy(pil_to_hwc_array(img, cfg)).permute(2, 0, 1).contiguous()


def _looks_hwc(t: torch.Tensor) -> bool:
    return t.dim() == 3 and t.shape[0] not in (1, 3, 4) and t.shape[-1] in (1, 3, 4)


def tensor_to_chw(
    t: torch.Tensor, *, require_uint8: bool = True, contiguous: bool = True
) -> torch.Tensor:
    """Validate a tensor input and return it as CHW with 3 or 4 channels.

    2-D means one channel; one channel is repeated to three. An HWC tensor is refused
    with an explanation instead of being silently misread (the runtime assumes CHW).
    """
    if require_uint8 and t.dtype != torch.uint8:
        raise StagingError(
            f"tensor dtype is {t.dtype}; the deferred path needs torch.uint8 "
            "(no silent cast: convert explicitly if the values are 0..255)"
        )
    if not require_uint8 and (t.is_complex() or t.dtype == torch.bool):
        raise StagingError(f"tensor dtype {t.dtype} is not an image")
    if t.dim() == 2:
        t = t.unsqueeze(0)
    if t.dim() != 3:
        raise StagingError(
            f"image tensor must be 2-D (H, W) or 3-D (C, H, W); got {tuple(t.shape)}"
        )
    if _looks_hwc(t):
        h, w, c = t.shape
        raise StagingError(
            f"tensor of shape {tuple(t.shape)} looks like HWC (H={h}, W={w}, C={c}); "
            "pass CHW, e.g. tensor.permute(2, 0, 1)"
        )
    c = t.shape[0]
    if c not in (1, 3, 4):
        raise StagingError(f"image tensor needs 1, 3 or 4 channels; got shape {tuple(t.shape)}")
    if t.shape[1] < 1 or t.shape[2] < 1:
        raise StagingError(f"image tensor has an empty side: {tuple(t.shape)}")
    if c == 1:
        t = t.repeat(3, 1, 1)
    return t.contiguous() if contiguous else t


def stage_input(obj: Any, cfg: PreprocessConfig, *, require_uint8: bool = True) -> torch.Tensor:
    """Stage one input (PIL image or tensor) as a CHW tensor on the CPU."""
    if isinstance(obj, DeviceImage):
        obj = obj.tensor
    if isinstance(obj, Image.Image):
        return pil_to_chw_uint8(obj, cfg)
    if isinstance(obj, torch.Tensor):
        t = tensor_to_chw(obj.detach().cpu(), require_uint8=require_uint8)
        if t.shape[0] == 4 and cfg.transparent_bg is None:
            t = t[:3].contiguous()
        return t
    raise StagingError(
        f"unsupported input type {type(obj).__name__}; expected a PIL image or a tensor"
    )


def input_size(obj: Any) -> tuple[int, int]:
    """(width, height) of a PIL image, a GPU-decoded image or a CHW / 2-D tensor."""
    if isinstance(obj, (Image.Image, DeviceImage)):
        return obj.size
    if isinstance(obj, torch.Tensor):
        if obj.dim() == 2:
            return int(obj.shape[1]), int(obj.shape[0])
        if obj.dim() == 3:
            return int(obj.shape[2]), int(obj.shape[1])
    raise StagingError(f"cannot read the size of {type(obj).__name__}")


def raw_channels(obj: Any) -> int:
    """Channels counted by the policy's raw byte estimate (SPEC section 7)."""
    if isinstance(obj, Image.Image):
        return 4 if pil_has_alpha(obj) else 3
    if isinstance(obj, DeviceImage):  # the runtime counts it as the tensor it is
        obj = obj.tensor
    if isinstance(obj, torch.Tensor):
        if obj.dim() == 2 or obj.shape[0] == 1:
            return 3
        return int(obj.shape[0])
    raise StagingError(f"unsupported input type {type(obj).__name__}")


def make_background(
    bg: BackgroundConfig, height: int, width: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """A float32 (3, H, W) background for alpha compositing."""
    if bg.pattern in PATTERN_VALUES:
        return torch.full((3, height, width), PATTERN_VALUES[bg.pattern], device=device)
    s = bg.chessboard_square_size
    ys = torch.arange(height, device=device) // s
    xs = torch.arange(width, device=device) // s
    parity = (ys[:, None] + xs[None, :]) % 2
    gray_parity = 1 if bg.chessboard_square_on_top_left else 0
    plane = torch.where(
        parity == gray_parity,
        torch.tensor(float(bg.chessboard_gray_value), device=device),
        torch.tensor(float(bg.chessboard_white_value), device=device),
    ).to(torch.float32)
    return plane.unsqueeze(0).expand(3, height, width).contiguous()


def composite_alpha(x: torch.Tensor, bg: BackgroundConfig | None) -> torch.Tensor:
    """Composite a float32 (B, 4, H, W) batch on the background; 3-channel input passes."""
    if x.shape[1] == 3:
        return x
    if x.shape[1] != 4:
        raise ValueError(f"composite expects 3 or 4 channels, got {x.shape[1]}")
    rgb = x[:, :3]
    if bg is None:
        return rgb.contiguous()
    alpha = torch.clamp(x[:, 3:4] / 255.0, 0, 1)
    background = make_background(bg, x.shape[2], x.shape[3], device=x.device)
    return torch.floor(torch.clamp(alpha * rgb + (1.0 - alpha) * background, 0, 255))


def normalization_tensors(
    cfg: PreprocessConfig, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, bias) float32 tensors of shape (1, 3, 1, 1), computed in Python floats."""
    scale = [1.0 / (255.0 * s) for s in cfg.image_std]
    bias = [-m / s for m, s in zip(cfg.image_mean, cfg.image_std, strict=True)]
    as_t = lambda v: torch.tensor(v, dtype=torch.float32, device=device).view(1, 3, 1, 1)  # noqa: E731
    return as_t(scale), as_t(bias)
