"""Legacy location of the statistics; TO BE REMOVED (issue 9): use ``kimi_bench.stats``.

``percentile`` and ``median`` are re-exported from there. ``Summary``/``summarize``,
``bootstrap_interval`` and ``relative_change`` stay only until ``bench/micro.py`` and
``bench/serve_report.py`` move to ``Measurement`` and ``compare``:
``bootstrap_interval`` resamples samples as if they were independent, which is the very
mistake issue 9 is about; do not use it in new code."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kimi_bench.stats import Measurement, median, pct_delta, percentile

__all__ = ["Summary", "bootstrap_interval", "median", "percentile", "relative_change", "summarize"]


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    p10: float
    p90: float
    mean: float
    min: float
    max: float

    def as_dict(self) -> dict[str, float]:
        return dict(vars(self))


def summarize(samples: Sequence[float]) -> Summary:
    m = Measurement(samples)
    return Summary(m.n, m.median, m.p10, m.p90, m.mean, m.min, m.max)


def bootstrap_interval(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float], Sequence[float]], float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap of ``statistic(a, b)`` over samples (legacy; see above)."""
    if not a or not b:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        v = statistic([rng.choice(a) for _ in a], [rng.choice(b) for _ in b])
        if math.isfinite(v):
            values.append(v)
    tail = (1 - confidence) / 2 * 100
    return (percentile(values, tail), percentile(values, 100 - tail))


def relative_change(base: float, new: float) -> float:
    """(new - base) / base as a fraction (legacy; ``kimi_bench.stats.pct_delta`` is percent)."""
    return pct_delta(base, new) / 100
