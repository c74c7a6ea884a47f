"""Repeated images in a workload: which earlier image each image repeats, seeded, so that
every process (and every arm) sees the same repeats. A repeat carries the very image (the
same bytes) of the one it repeats, as a multi-turn chat or the same picture sent by many
users does; sglang 0.5.23's preprocess cache then hits it (``pipeline.preprocess_cache``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def repeat_sources(n: int, share: float, seed: int) -> list[int]:
    """For each of ``n`` images, the index of the image it carries: its own, or for
    ``round(share * n)`` of them (seeded; never the first) an earlier image's original."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"repeat share {share} is not between 0 and 1")
    k = min(round(share * n), max(n - 1, 0))
    rng = random.Random(seed)
    src = list(range(n))
    for j in sorted(rng.sample(range(1, n), k)) if k else ():
        src[j] = src[rng.randrange(j)]
    return src


def with_repeats(items: Sequence[T], share: float, seed: int) -> list[T]:
    """``items`` with a seeded share of them replaced by an earlier item."""
    return [items[i] for i in repeat_sources(len(items), share, seed)]
