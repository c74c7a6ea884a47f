"""Synthetic request images for ``micro`` and ``serve-ab``: seeded noise, blank, or real
sample photos resized, and the ``COUNTxWIDTHxHEIGHT`` spec parser."""

from __future__ import annotations

import re

import numpy as np
from PIL import Image

from kimi_bench.corpus import package_photos

CONTENTS = ("random", "blank", "photo")
_SPEC = re.compile(r"^\s*(\d+)x(\d+)x(\d+)\s*$")


class ImageSpecError(ValueError):
    """A bad --images / --resolution value."""


def parse_image_spec(text: str) -> tuple[tuple[int, int, int], ...]:
    """``"2x1536x1024,1x4096x3072"`` -> ((2, 1536, 1024), (1, 4096, 3072)).

    Width comes first, like PIL's ``size``."""
    groups = []
    for part in text.split(","):
        m = _SPEC.match(part)
        if not m:
            raise ImageSpecError(
                f"bad image spec {part.strip()!r}: expected COUNTxWIDTHxHEIGHT, "
                "e.g. 4x1536x1024 (comma-separate several)"
            )
        count, w, h = (int(g) for g in m.groups())
        if min(count, w, h) < 1:
            raise ImageSpecError(
                f"bad image spec {part.strip()!r}: count, width and height must be >= 1"
            )
        groups.append((count, w, h))
    return tuple(groups)


def describe_spec(groups: tuple[tuple[int, int, int], ...]) -> str:
    parts = [f"{c} image{'s' if c > 1 else ''} of width {w} and height {h}" for c, w, h in groups]
    return " + ".join(parts)


def parse_resolution(text: str) -> tuple[int, int]:
    """``"1536x1024"`` -> (1536, 1024), width first."""
    m = re.match(r"^\s*(\d+)x(\d+)\s*$", text)
    if not m or min(int(m.group(1)), int(m.group(2))) < 1:
        raise ImageSpecError(f"bad resolution {text!r}: expected WIDTHxHEIGHT, e.g. 1536x1024")
    return int(m.group(1)), int(m.group(2))


def make_image(w: int, h: int, content: str, rng: np.random.Generator, index: int) -> Image.Image:
    if content == "random":
        arr = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        return Image.frombytes("RGB", (w, h), arr.tobytes())
    if content == "blank":
        return Image.new("RGB", (w, h), (128, 128, 128))
    if content == "photo":
        photos = package_photos()
        if not photos:
            raise ImageSpecError(
                "--content photo needs sample photos from matplotlib or scikit-learn; "
                "install kimi-bench[plot,photos]"
            )
        src = photos[index % len(photos)].load().convert("RGB")
        return src.resize((w, h), Image.Resampling.BICUBIC)
    raise ImageSpecError(f"unknown content {content!r}; expected one of {CONTENTS}")


def make_images(
    groups: tuple[tuple[int, int, int], ...], content: str, seed: int
) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    out: list[Image.Image] = []
    for count, w, h in groups:
        for _ in range(count):
            out.append(make_image(w, h, content, rng, len(out)))
    return out
