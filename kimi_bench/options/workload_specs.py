"""Workload distributions given as text: image sizes (``--image-sizes``), images per request
(``--images-per-request``), the format mix (``--image-format``) and the content mix
(``--image-content``). Each parser raises
WorkloadError saying what it expected (a usage error); each distribution draws with a
``numpy`` generator the caller seeds, so a workload is the same for every arm."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, get_args

from kimi_bench.options.base import Content

if TYPE_CHECKING:
    import numpy as np

FORMATS = ("jpeg", "png", "webp")
CONTENTS: tuple[str, ...] = get_args(Content)
MIME = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}
MAX_SIDE = 65_535
_SIZE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")
_COUNT_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
T = TypeVar("T")


class WorkloadError(ValueError):
    """A workload that cannot be used: named file and line where there is one (exit 2)."""


def _size(text: str, what: str) -> tuple[int, int]:
    m = _SIZE.match(text)
    if not m:
        raise WorkloadError(f"bad {what} {text.strip()!r}: expected WIDTHxHEIGHT, e.g. 1536x1024")
    w, h = int(m.group(1)), int(m.group(2))
    if not (1 <= w <= MAX_SIDE and 1 <= h <= MAX_SIDE):
        raise WorkloadError(f"bad {what} {text.strip()!r}: sides must be 1..{MAX_SIDE} pixels")
    return w, h


def _weighted(text: str, item: Callable[[str], T], what: str) -> tuple[list[T], list[float]]:
    """``A:3,B:1`` (or ``A,B``: equal weights) -> ([A, B], [3, 1]); weights > 0."""
    values: list[T] = []
    weights: list[float] = []
    for part in (p for p in text.split(",") if p.strip()):
        head, sep, tail = part.rpartition(":") if ":" in part else (part, "", "1")
        try:
            weight = float(tail)
        except ValueError:
            raise WorkloadError(f"bad {what} weight {tail!r} in {part.strip()!r}") from None
        if not weight > 0 or weight == float("inf"):
            raise WorkloadError(f"bad {what} weight in {part.strip()!r}: a number > 0")
        values.append(item(head if sep else part))
        weights.append(weight)
    if not values:
        raise WorkloadError(f"empty {what} list")
    return values, weights


@dataclass(frozen=True)
class Choice:
    """A weighted choice among values (sizes, counts, formats)."""

    values: tuple
    weights: tuple[float, ...]

    def draw(self, rng: np.random.Generator, n: int) -> list:
        import numpy as np  # here: the options (every command's --help) never wait for numpy

        p = np.asarray(self.weights, dtype=float)
        picks = rng.choice(len(self.values), size=n, p=p / p.sum())
        return [self.values[int(i)] for i in picks]


@dataclass(frozen=True)
class SizeRange:
    """Widths uniform in [low[0], high[0]], heights in [low[1], high[1]] (inclusive)."""

    low: tuple[int, int]
    high: tuple[int, int]

    def draw(self, rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
        ws = rng.integers(self.low[0], self.high[0] + 1, size=n)
        hs = rng.integers(self.low[1], self.high[1] + 1, size=n)
        return [(int(w), int(h)) for w, h in zip(ws, hs, strict=True)]


SizeDist = Choice | SizeRange


def parse_sizes(text: str, folder_sizes: Callable[[str], Sequence[tuple[int, int]]]) -> SizeDist:
    """``random:256x256-2048x2048`` (a range), ``640x480:3,1536x1024:1`` (weights) or
    ``folder:DIR`` (the sizes of a folder's images, each equally likely; ``folder_sizes``
    reads them)."""
    t = str(text).strip()
    kind, sep, rest = t.partition(":")
    if sep and kind.strip().lower() == "random":
        lo, dash, hi = rest.partition("-")
        if not dash:
            raise WorkloadError(f"bad size range {t!r}: expected random:WxH-WxH")
        low, high = _size(lo, "size range start"), _size(hi, "size range end")
        if low[0] > high[0] or low[1] > high[1]:
            raise WorkloadError(f"bad size range {t!r}: the start is larger than the end")
        return SizeRange(low, high)
    if sep and kind.strip().lower() == "folder":
        sizes = tuple(folder_sizes(rest.strip()))
        return Choice(sizes, (1.0,) * len(sizes))
    values, weights = _weighted(t, lambda s: _size(s, "image size"), "image size")
    return Choice(tuple(values), tuple(weights))


def parse_counts(text: str | int, max_count: int = 64) -> Choice:
    """Images per request: ``3``, ``1-4`` (each equally likely) or ``1:5,2:3,4:1``."""
    t = str(text).strip()

    def count(s: str) -> int:
        if not s.strip().isdigit() or not 1 <= int(s) <= max_count:
            raise WorkloadError(f"bad image count {s.strip()!r}: an integer 1..{max_count}")
        return int(s)

    if m := _COUNT_RANGE.match(t):
        lo, hi = count(m.group(1)), count(m.group(2))
        if lo > hi:
            raise WorkloadError(f"bad image count range {t!r}: the start is larger than the end")
        span = tuple(range(lo, hi + 1))
        return Choice(span, (1.0,) * len(span))
    values, weights = _weighted(t, count, "image count")
    return Choice(tuple(values), tuple(weights))


def parse_formats(text: str) -> Choice:
    """``jpeg``, ``png``, ``webp`` or a mix ``jpeg:3,png:1``."""

    def fmt(s: str) -> str:
        name = s.strip().lower().replace("jpg", "jpeg")
        if name not in FORMATS:
            raise WorkloadError(f"bad image format {s.strip()!r}: one of {', '.join(FORMATS)}")
        return name

    values, weights = _weighted(str(text), fmt, "image format")
    return Choice(tuple(values), tuple(weights))


def parse_contents(text: str) -> Choice:
    """``random``, ``blank``, ``photo`` or a mix ``photo:3,random:1``."""

    def content(s: str) -> str:
        name = s.strip().lower()
        if name not in CONTENTS:
            raise WorkloadError(f"bad image content {s.strip()!r}: one of {', '.join(CONTENTS)}")
        return name

    values, weights = _weighted(str(text), content, "image content")
    return Choice(tuple(values), tuple(weights))
