"""Encoded inputs for the vLLM K3 path's tests: the built-in corpus's images saved as PNG
(and the photos' JPEGs as shipped), plus the cases where vLLM's pixels differ from SGLang's
by design: EXIF-rotated JPEGs and images with transparency."""

from __future__ import annotations

from io import BytesIO

from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.corpus import builtin_corpus
from kimi_bench.domain.vllm_corpus import by_design_inputs, exif_jpeg, transparent_png

__all__ = ["encoded_inputs", "exif_jpeg", "transparent_png"]


def _save(image: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = BytesIO()
    image.save(buf, fmt, **kw)
    return buf.getvalue()


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
    return out | by_design_inputs()
