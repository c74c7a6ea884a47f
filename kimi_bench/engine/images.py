"""Synthetic request images for ``micro`` and ``serve-ab``: seeded noise, blank, or real
sample photos resized, and the ``COUNTxWIDTHxHEIGHT`` spec parser."""

from __future__ import annotations

from typing import get_args

import numpy as np
from PIL import Image

from kimi_bench.domain.corpus import package_photos
from kimi_bench.options import Content


class ImageSpecError(ValueError):
    """A bad --images / --resolution value."""


def describe_spec(groups: tuple[tuple[int, int, int], ...]) -> str:
    parts = [f"{c} image{'s' if c > 1 else ''} of width {w} and height {h}" for c, w, h in groups]
    return " + ".join(parts)


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
    raise ImageSpecError(
        f"unknown content {content!r}; expected one of {', '.join(get_args(Content))}"
    )


def make_images(
    groups: tuple[tuple[int, int, int], ...], content: str, seed: int
) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    out: list[Image.Image] = []
    for count, w, h in groups:
        for _ in range(count):
            out.append(make_image(w, h, content, rng, len(out)))
    return out
