"""The Mann-Whitney U rank test, as the gate, the baseline and the history rules use it
(and ``compare.compare`` on per-unit values): exact p-values for small samples without
ties, the tie-corrected normal approximation otherwise."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

EXACT_MAX_N = 50  # exact p-values up to this many values per side, when no ties


class RankTestDoc(TypedDict):
    """A ``RankTest``'s fields, as a report holds them."""

    p_value: float
    method: str
    u: float
    alternative: str
    n_x: int
    n_y: int


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U of ``x`` against ``y``; ``u`` is the U statistic of ``x``."""

    p_value: float
    method: str  # "exact", "asymptotic" or "none" (an empty side)
    u: float
    alternative: str
    n_x: int
    n_y: int

    def as_dict(self) -> RankTestDoc:
        return RankTestDoc(p_value=self.p_value, method=self.method, u=self.u,
                           alternative=self.alternative, n_x=self.n_x, n_y=self.n_y)  # fmt: skip


def mann_whitney(
    x: Sequence[float], y: Sequence[float], alternative: str = "two-sided"
) -> RankTest:
    """Mann-Whitney U test (scipy.stats.mannwhitneyu). ``alternative="greater"``: x tends to
    be larger than y (the gate's "new is worse" for lower-is-better metrics).

    Exact p-values when there are no ties and each side has <= EXACT_MAX_N values;
    otherwise the normal approximation with tie and continuity correction (what scipy's
    "auto" picks whenever ties are present)."""
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less; got {alternative!r}")
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if not xs.size or not ys.size:
        return RankTest(math.nan, "none", math.nan, alternative, xs.size, ys.size)
    pooled = np.concatenate([xs, ys])
    ties = np.unique(pooled).size < pooled.size
    method = "exact" if not ties and max(xs.size, ys.size) <= EXACT_MAX_N else "asymptotic"
    from scipy import stats  # lazily: a second of import that commands without a test skip

    res = stats.mannwhitneyu(xs, ys, alternative=alternative, method=method)
    return RankTest(float(res.pvalue), method, float(res.statistic), alternative, xs.size, ys.size)
