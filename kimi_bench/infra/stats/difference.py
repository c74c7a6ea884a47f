"""Differences of percentiles between unpaired Measurements (``stats``), e.g. an arm's
time minus its control's (the payload cost in ``micro``), and the ratio of two such
differences (a speedup on payload cost), each with a seeded cluster-bootstrap interval.

As everywhere in ``stats``: below ``MIN_UNITS`` independent units on a side there is no
confidence interval (a min..max range, or none, with the reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kimi_bench.infra.stats import (
    MIN_UNITS,
    RESAMPLES,
    Interval,
    Measurement,
    bootstrap_method,
    check_interval_args,
    cluster_bootstrap,
    no_interval,
    percentile,
)
from kimi_bench.infra.stats.compare import TOO_FEW_UNITS


@dataclass(frozen=True)
class Difference:
    """A's ``q`` percentile minus B's, in their unit, with its interval."""

    value: float
    unit: str
    interval: Interval

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "interval": self.interval.as_dict()}


def difference(
    a: Measurement,
    b: Measurement,
    *,
    q: float = 50.0,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Difference:
    """Unpaired ``percentile(a) - percentile(b)``: the units of both sides resampled
    independently (as ``compare``); below MIN_UNITS per side, the min..max of the per-unit
    differences over every (A unit, B unit) pair, not a CI."""
    check_interval_args(q, confidence, resamples)
    if a.unit != b.unit:
        raise ValueError(f"cannot subtract {b.unit!r} from {a.unit!r}")
    k = min(a.n_units, b.n_units)
    if not a.n or not b.n:
        return Difference(math.nan, a.unit, no_interval(k, "no samples on one side"))
    value = percentile(a.samples, q) - percentile(b.samples, q)
    if k < MIN_UNITS:
        why = f"{TOO_FEW_UNITS}: A has {a.n_units}, B has {b.n_units} (needs >= {MIN_UNITS})"
        ds = [x - y for x in a.unit_values(q) for y in b.unit_values(q)]
        iv = Interval(min(ds), max(ds), "range", "min..max of per-unit differences", k, None, why)
        return Difference(value, a.unit, iv)
    rng = np.random.default_rng(seed)
    ds = cluster_bootstrap(a.unit_groups, q, rng, resamples) - cluster_bootstrap(
        b.unit_groups, q, rng, resamples
    )
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ds, [tail, 100 - tail])
    method = f"{bootstrap_method(a)}, both sides independently"
    return Difference(value, a.unit, Interval(float(lo), float(hi), "ci", method, k, confidence))


def ratio_of_differences(
    a: Measurement,
    a_ref: Measurement,
    b: Measurement,
    b_ref: Measurement,
    *,
    q: float = 50.0,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, Interval]:
    """``(pa - pa_ref) / (pb - pb_ref)`` of the ``q`` percentiles (e.g. eager's payload cost
    over deferred's: each arm minus its control), with a percentile bootstrap interval: the
    units of ``a`` and ``b`` are paired by id (the same units drawn for both in a resample),
    ``a_ref`` and ``b_ref`` resampled independently. NaN when a difference is not above
    zero; no interval with fewer than MIN_UNITS units on a side, or when more than the
    interval's tail of resamples has a difference at or below zero (unbounded)."""
    check_interval_args(q, confidence, resamples)
    va = dict(zip(a.unit_keys, a.unit_values(q), strict=True))
    vb = dict(zip(b.unit_keys, b.unit_values(q), strict=True))
    ids = [u for u in va if u in vb]
    xa, xb = np.array([va[u] for u in ids]), np.array([vb[u] for u in ids])
    # the point value from every sample (as each difference alone); pairs drive the resamples
    num = percentile(a.samples, q) - percentile(a_ref.samples, q)
    den = percentile(b.samples, q) - percentile(b_ref.samples, q)
    k = min(len(ids), a_ref.n_units, b_ref.n_units)
    if not (num > 0 and den > 0):
        return math.nan, no_interval(k, "a difference is not above zero: no ratio")
    value = num / den
    if k < MIN_UNITS:
        return value, no_interval(k, f"{TOO_FEW_UNITS} ({k} < {MIN_UNITS})")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(ids), size=(resamples, len(ids)))
    nums = np.percentile(xa[picks], q, axis=1) - cluster_bootstrap(
        a_ref.unit_groups, q, rng, resamples
    )
    dens = np.percentile(xb[picks], q, axis=1) - cluster_bootstrap(
        b_ref.unit_groups, q, rng, resamples
    )
    tail = (1 - confidence) / 2
    if np.mean(dens <= 0) > tail or np.mean(nums <= 0) > tail:
        return value, no_interval(k, "a difference reaches zero in the resamples: unbounded")
    with np.errstate(divide="ignore", invalid="ignore"):
        rs = np.where(dens > 0, nums / dens, np.inf)
    lo, hi = np.percentile(rs, [tail * 100, 100 - tail * 100])
    method = "percentile bootstrap: paired units of A and B, references independently"
    return value, Interval(float(lo), float(hi), "ci", method, k, confidence)
