"""vLLM 0.33's Kimi-K3 image path at the API server, done here (SPEC section 13).

vLLM has no deferral: its API server always preprocesses, and since vLLM PR #50411 (on by
default for K3) it stops at uint8 patches; every worker normalises them to BF16 on its GPU.
Step by step, with the vLLM function each step follows (paths under ``vllm/``):

- decode (``multimodal/media/image.py`` ``ImageMediaIO.load_bytes``): PIL opens the bytes
  with vLLM's format allowlist, applies the EXIF orientation (``ImageOps.exif_transpose``,
  errors ignored), loads, and converts to RGB; an image with transparency (RGBA, LA, PA or
  a ``transparency`` entry) is composited over white *before* the resize
  (``multimodal/image.py`` ``convert_image_mode`` / ``rgba_to_rgb``), not over the K3
  checkpoint's chessboard after it as SGLang does;
- plan (``transformers_utils/processors/kimi_k25_vision_fused.py`` ``navit_resize_image``):
  the same arithmetic as SGLang's (:func:`kimi_bench.domain.navit.plan_resize`);
- resize: PIL ``resize(BICUBIC)`` in uint8 (fixed-point, no float antialias), then
  ``np.asarray``;
- pad and patchify (``_write_fused_patches``): zero padding to the plan's padded size, one
  write into ``(P, 3, 14, 14)`` uint8 in row-major patch order;
- normalise (``model_executor/layers/fusion/mm_input_norm.py``, ``forward_native``, the
  semantic reference of the fused kernel): ``x * (rescale / std) + (-mean / std)`` in FP32,
  then BF16.

The patches are bit-identical to vLLM's own (``tests/vllm``, ``--reference vllm``
environment: ``scripts/vllm-env.sh``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from io import BytesIO

import numpy as np
import torch
from PIL import Image, ImageOps

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.navit import ResizePlan, plan_resize

VLLM_VERSION = "0.33.0"

# The still-image formats vLLM's API server lets PIL open (``multimodal/image.py``
# ``ALLOWED_IMAGE_FORMATS``); EPS, WMF and the stub drivers are refused there.
ALLOWED_FORMATS: tuple[str, ...] = (
    *("AVIF", "BLP", "BMP", "CUR", "DCX", "DDS", "DIB", "FITS", "FLI", "FTEX", "GBR"),
    *("GIF", "ICNS", "ICO", "IM", "IMT", "IPTC", "JPEG", "JPEG2000", "MCIDAS", "MSP"),
    *("PCD", "PCX", "PIXAR", "PNG", "PPM", "PSD", "QOI", "SGI", "SPIDER", "SUN", "TGA"),
    *("TIFF", "WEBP", "XBM", "XPM", "XVTHUMB"),
)
WHITE = (255, 255, 255)


@dataclass(frozen=True)
class Decoded:
    """An image as vLLM's API server hands it to the processor, and what changed it."""

    image: Image.Image  # RGB
    stored_size: tuple[int, int]  # width, height as the file stores them
    exif_rotated: bool  # the EXIF orientation changed the pixels (and maybe the size)
    composited: bool  # transparency was filled with white before the resize
    converted: bool = False  # another mode without transparency converted to RGB (a copy)
    source_mode: str = "RGB"  # the decoded image's mode, before the conversion to RGB


@dataclass(frozen=True)
class Patches:
    """What vLLM's API server sends for one image (device normalisation on)."""

    patches: torch.Tensor  # (P, 3, patch, patch) uint8
    plan: ResizePlan
    decoded: Decoded

    @property
    def grid_thw(self) -> tuple[int, int, int]:
        return self.plan.grid_thw


def has_transparency(image: Image.Image) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info


def to_rgb(image: Image.Image) -> tuple[Image.Image, bool]:
    """RGB as vLLM makes it; True when transparency was composited over white."""
    if has_transparency(image):
        rgba = image if image.mode == "RGBA" else image.convert("RGBA")
        out = Image.new("RGB", rgba.size, WHITE)
        out.paste(rgba, mask=rgba.split()[3])
        return out, True
    if image.mode == "RGB":
        return image, False
    return image.convert("RGB"), False


def decode(data: bytes) -> Decoded:
    """Decode encoded image bytes as ``ImageMediaIO.load_bytes`` does (ValueError when PIL
    cannot open them or the format is not allowed)."""
    try:
        image = Image.open(BytesIO(data), formats=ALLOWED_FORMATS)
        stored = image.size
        oriented: Image.Image = image
        with contextlib.suppress(Exception):
            oriented = ImageOps.exif_transpose(image)
        oriented.load()
        rgb, composited = to_rgb(oriented)
    except (OSError, Image.UnidentifiedImageError, SyntaxError) as exc:
        raise ValueError(f"vLLM would refuse this image: {exc}") from None
    rotated = oriented.size != stored or _orientation(image) not in (None, 1)
    converted = not composited and rgb is not oriented
    return Decoded(rgb, stored, rotated, composited, converted, oriented.mode)


def _orientation(image: Image.Image) -> int | None:
    with contextlib.suppress(Exception):
        value = image.getexif().get(0x0112)
        return int(value) if value is not None else None
    return None


def patchify(pixels: np.ndarray, plan: ResizePlan) -> torch.Tensor:
    """Zero-pad an ``(new_h, new_w, 3)`` uint8 array to the plan's padded size and cut it
    into ``(P, 3, p, p)`` patches in row-major patch order."""
    p = plan.patch_size
    ph, pw = plan.padded_height, plan.padded_width
    padded = np.zeros((ph, pw, 3), dtype=np.uint8)
    padded[: plan.new_height, : plan.new_width] = pixels
    blocks = padded.reshape(ph // p, p, pw // p, p, 3).transpose(0, 2, 4, 1, 3)
    return torch.from_numpy(np.ascontiguousarray(blocks).reshape(-1, 3, p, p))


def resize(image: Image.Image, plan: ResizePlan) -> np.ndarray:
    """PIL's uint8 bicubic to the plan's size (a new image), then ``np.asarray`` (a copy):
    ``(new_h, new_w, 3)`` uint8."""
    resized = image.resize((plan.new_width, plan.new_height), resample=Image.Resampling.BICUBIC)
    return np.asarray(resized)


def preprocess(decoded: Decoded, cfg: PreprocessConfig) -> Patches:
    """The fused processor's uint8 patches for one decoded image."""
    width, height = decoded.image.size
    plan = plan_resize(width, height, cfg)
    return Patches(patchify(resize(decoded.image, plan), plan), plan, decoded)


def normalize_bf16(patches: torch.Tensor, cfg: PreprocessConfig) -> torch.Tensor:
    """A worker's normalisation of uint8 patches: ``(P, 3 * p * p)`` BF16."""
    rescale = 1 / 255
    mean = torch.tensor(cfg.image_mean, dtype=torch.float32)
    std = torch.tensor(cfg.image_std, dtype=torch.float32)
    weight, bias = (rescale / std).to(patches.device), (-mean / std).to(patches.device)
    n = patches.shape[0]
    x = patches.reshape(n, 3, -1)
    x = x * weight.view(1, 3, 1) + bias.view(1, 3, 1)
    return x.view(n, -1).to(torch.bfloat16)


def encoded_item_bytes(patches: Patches) -> int:
    """Bytes of one item as it travels from the API server (uint8 patches)."""
    return patches.patches.numel()
