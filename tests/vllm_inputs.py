"""Encoded inputs for the vLLM K3 path's tests: the built-in corpus's images saved as PNG
(and the photos' JPEGs as shipped), plus the cases where vLLM's pixels differ from SGLang's
by design: EXIF-rotated JPEGs and images with transparency."""

from __future__ import annotations

from io import BytesIO

import numpy as np
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.corpus import builtin_corpus


def _save(image: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = BytesIO()
    image.save(buf, fmt, **kw)
    return buf.getvalue()


def exif_jpeg(width: int, height: int, orientation: int, seed: int = 0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _save(Image.fromarray(pixels, "RGB"), "JPEG", quality=90, exif=exif.tobytes())


def transparent_png(width: int, height: int, mode: str = "RGBA", seed: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    if mode == "RGBA":
        px = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
        px[: height // 2, :, 3] = 0  # the top half fully transparent
        return _save(Image.fromarray(px, "RGBA"), "PNG")
    if mode == "LA":
        px = rng.integers(0, 256, (height, width, 2), dtype=np.uint8)
        return _save(Image.fromarray(px, "LA"), "PNG")
    im = Image.fromarray(rng.integers(0, 16, (height, width), dtype=np.uint8), "P")
    im.putpalette(list(rng.integers(0, 256, 48, dtype=np.uint8)))
    return _save(im, "PNG", transparency=3)


def encoded_inputs() -> dict[str, bytes]:
    """name -> encoded bytes: every built-in image input, then the by-design cases."""
    out: dict[str, bytes] = {}
    for entry in builtin_corpus(get_preset("kimi-k3")):
        if entry.encoded is not None:
            out[entry.name] = entry.encoded()
            continue
        value = entry.load()
        if isinstance(value, Image.Image):
            out[entry.name] = _save(value, "TIFF" if value.mode in ("I;16", "CMYK") else "PNG")
    out["exif_orientation_6_640x480.jpg"] = exif_jpeg(640, 480, 6)
    out["exif_orientation_3_1536x1024.jpg"] = exif_jpeg(1536, 1024, 3)
    out["exif_orientation_8_300x200.jpg"] = exif_jpeg(300, 200, 8)
    out["rgba_half_transparent_500x300.png"] = transparent_png(500, 300)
    out["la_alpha_120x90.png"] = transparent_png(120, 90, "LA")
    out["p_trns_96x64.png"] = transparent_png(96, 64, "P")
    return out
