"""Statistics over raw samples: percentiles, summaries, intervals. Samples are always
kept in reports; these numbers are derived from them on demand."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass


def percentile(samples: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not samples:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    xs = sorted(samples)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 50)


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    p10: float
    p90: float
    mean: float
    min: float
    max: float

    @property
    def iqr_over_median(self) -> float:
        return math.nan if not self.median else (self.p90 - self.p10) / abs(self.median)

    def as_dict(self) -> dict[str, float]:
        return {
            "n": self.n,
            "median": self.median,
            "p10": self.p10,
            "p90": self.p90,
            "mean": self.mean,
            "min": self.min,
            "max": self.max,
        }


def summarize(samples: Sequence[float]) -> Summary:
    xs = [float(x) for x in samples]
    if not xs:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan)
    return Summary(
        len(xs),
        median(xs),
        percentile(xs, 10),
        percentile(xs, 90),
        sum(xs) / len(xs),
        min(xs),
        max(xs),
    )


def bootstrap_interval(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float], Sequence[float]], float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(a, b)``, resampling each independently."""
    if not a or not b:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        ra = [a[rng.randrange(len(a))] for _ in a]
        rb = [b[rng.randrange(len(b))] for _ in b]
        v = statistic(ra, rb)
        if math.isfinite(v):
            values.append(v)
    tail = (1 - confidence) / 2 * 100
    return (percentile(values, tail), percentile(values, 100 - tail))


def relative_change(base: float, new: float) -> float:
    """(new - base) / base; e.g. -0.79 for a 79% drop."""
    return math.nan if not base else (new - base) / base
