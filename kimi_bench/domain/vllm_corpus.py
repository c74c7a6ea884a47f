"""The inputs where vLLM 0.33's K3 pixels differ from SGLang's by design (SPEC section 13),
encoded as a client sends them: EXIF-rotated JPEGs (vLLM applies the orientation: width,
height and grid change) and images with transparency (vLLM composites over white before
the resize). ``parity --runtime vllm-0.33`` adds them to the built-in corpus."""

from __future__ import annotations

from io import BytesIO

import numpy as np
from PIL import Image

from kimi_bench.domain.corpus import CorpusEntry


def _save(image: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = BytesIO()
    image.save(buf, fmt, **kw)
    return buf.getvalue()


def exif_jpeg(width: int, height: int, orientation: int, seed: int = 0) -> bytes:
    """A JPEG of seeded noise stored ``width`` x ``height`` with an EXIF orientation."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _save(Image.fromarray(pixels, "RGB"), "JPEG", quality=90, exif=exif.tobytes())


def transparent_png(width: int, height: int, mode: str = "RGBA", seed: int = 1) -> bytes:
    """A PNG with transparency: RGBA (the top half fully transparent), LA, or P + tRNS."""
    rng = np.random.default_rng(seed)
    if mode == "RGBA":
        px = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
        px[: height // 2, :, 3] = 0
        return _save(Image.fromarray(px, "RGBA"), "PNG")
    if mode == "LA":
        px = rng.integers(0, 256, (height, width, 2), dtype=np.uint8)
        return _save(Image.fromarray(px, "LA"), "PNG")
    im = Image.fromarray(rng.integers(0, 16, (height, width), dtype=np.uint8), "P")
    im.putpalette(list(rng.integers(0, 256, 48, dtype=np.uint8)))
    return _save(im, "PNG", transparency=3)


BY_DESIGN: dict[str, tuple[str, tuple[int, int, object]]] = {
    "exif_orientation_6_640x480.jpg": ("exif", (640, 480, 6)),
    "exif_orientation_3_1536x1024.jpg": ("exif", (1536, 1024, 3)),
    "exif_orientation_8_300x200.jpg": ("exif", (300, 200, 8)),
    "rgba_half_transparent_500x300.png": ("alpha", (500, 300, "RGBA")),
    "la_alpha_120x90.png": ("alpha", (120, 90, "LA")),
    "p_trns_96x64.png": ("alpha", (96, 64, "P")),
}


def by_design_inputs() -> dict[str, bytes]:
    """name -> encoded bytes of every by-design input."""
    out = {}
    for name, (kind, (w, h, arg)) in BY_DESIGN.items():
        exif = kind == "exif"
        out[name] = exif_jpeg(w, h, int(str(arg))) if exif else transparent_png(w, h, str(arg))
    return out


def by_design_entries() -> list[CorpusEntry]:
    """The by-design inputs as corpus entries (each loads its own bytes with PIL)."""

    def entry(name: str, data: bytes) -> CorpusEntry:
        def load() -> Image.Image:
            with Image.open(BytesIO(data)) as im:
                im.load()
                return im.copy()

        return CorpusEntry(name, "generated (vLLM by design)", load, encoded=lambda: data)

    return [entry(n, d) for n, d in by_design_inputs().items()]
