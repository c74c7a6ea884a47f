"""A/B comparisons of two Measurements (``stats``): the signed delta of a percentile with
its cluster-bootstrap interval, a rank test and a verdict (``compare``), and paired ratios
such as the speedup eager / deferred (``ratio``).

A delta is called significant only with >= ``MIN_UNITS`` independent units per side and
an interval that excludes zero; below that the interval is the range of per-unit deltas,
never a confidence interval, and with one unit a side (a single repeat's throughput) there
is no interval at all: the delta is a point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from kimi_bench.infra.stats import (
    MIN_UNITS,
    RESAMPLES,
    Interval,
    IntervalDoc,
    Measurement,
    bootstrap_method,
    check_interval_args,
    cluster_bootstrap,
    no_interval,
    pct_delta,
    percentile,
)
from kimi_bench.infra.stats.rank_test import RankTest, RankTestDoc, mann_whitney

SIGNIFICANT = "significant"
STRADDLES_ZERO = "interval straddles zero"
TOO_FEW_UNITS = "not enough independent samples"


class ComparisonDoc(TypedDict):
    """``Comparison.as_dict``: its fields, the interval and the test nested, ``significant``."""

    a_label: str
    b_label: str
    unit: str
    q: float
    a_value: float
    b_value: float
    delta_pct: float
    interval: IntervalDoc
    verdict: str
    test: RankTestDoc
    a_units: int
    b_units: int
    significant: bool


class NoComparison(TypedDict):
    """What stands for a comparison when a side has nothing to compare."""

    delta_pct: None
    verdict: str
    significant: bool


@dataclass(frozen=True)
class Comparison:
    """B versus A on the ``q`` percentile (values in ``unit``, delta in signed percent)."""

    a_label: str
    b_label: str
    unit: str
    q: float
    a_value: float
    b_value: float
    delta_pct: float
    interval: Interval
    verdict: str  # SIGNIFICANT, STRADDLES_ZERO, TOO_FEW_UNITS or why there is no delta
    test: RankTest  # two-sided Mann-Whitney on the per-unit values
    a_units: int
    b_units: int

    @property
    def significant(self) -> bool:
        return self.verdict == SIGNIFICANT

    def as_dict(self) -> ComparisonDoc:
        """Fields (interval and test as nested dicts) plus ``significant``."""
        return ComparisonDoc(
            a_label=self.a_label, b_label=self.b_label, unit=self.unit, q=self.q,
            a_value=self.a_value, b_value=self.b_value, delta_pct=self.delta_pct,
            interval=self.interval.as_dict(), verdict=self.verdict, test=self.test.as_dict(),
            a_units=self.a_units, b_units=self.b_units, significant=self.significant,
        )  # fmt: skip


def _too_few(a: Measurement, b: Measurement, delta: float) -> Interval:
    """Range of the per-unit deltas over every (A unit, B unit) pair; not a CI."""
    why = (
        f"{TOO_FEW_UNITS}: A has {a.n_units}, B has {b.n_units} independent unit(s) "
        f"(needs >= {MIN_UNITS} each)"
    )
    if not a.n or not b.n or math.isnan(delta):
        return no_interval(min(a.n_units, b.n_units), why)
    if a.n_units == 1 and b.n_units == 1:  # one unit a side (a single repeat): a point
        return no_interval(1, f"{why}; one unit a side: the delta is a point, no interval")
    deltas = [pct_delta(x, y) for x in a.unit_values() for y in b.unit_values()]
    deltas = [d for d in deltas if math.isfinite(d)]
    if not deltas:
        return no_interval(min(a.n_units, b.n_units), why)
    method = "min..max of per-unit deltas"
    return Interval(min(deltas), max(deltas), "range", method, min(a.n_units, b.n_units), None, why)


def compare(
    a: Measurement,
    b: Measurement,
    *,
    q: float = 50.0,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """B versus A: signed ``pct_delta`` of the ``q`` percentiles, its interval (units of both
    sides resampled), a two-sided Mann-Whitney test on the per-unit values, and a verdict:
    significant only with >= MIN_UNITS units per side and an interval that excludes zero."""
    check_interval_args(q, confidence, resamples)
    if a.unit != b.unit:
        raise ValueError(f"cannot compare {a.unit!r} with {b.unit!r}")
    av, bv = percentile(a.samples, q), percentile(b.samples, q)
    delta = pct_delta(av, bv)
    units = (a.n_units, b.n_units)
    k = min(units)
    if k < MIN_UNITS:
        iv, verdict = _too_few(a, b, delta), TOO_FEW_UNITS
    elif math.isnan(delta):
        verdict = f"A's {a.label or 'value'} is zero: no relative delta"
        iv = no_interval(k, verdict)
    else:
        rng = np.random.default_rng(seed)
        sa = cluster_bootstrap(a.unit_groups, q, rng, resamples)
        sb = cluster_bootstrap(b.unit_groups, q, rng, resamples)
        with np.errstate(divide="ignore", invalid="ignore"):
            ds = (sb - sa) / np.abs(sa) * 100.0
        ds = ds[np.isfinite(ds)]
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(ds, [tail, 100 - tail]) if ds.size else (math.nan, math.nan)
        ma, mb = bootstrap_method(a), bootstrap_method(b)
        method = f"{ma}, both sides" if ma == mb else f"{ma} (A), {mb} (B)"
        iv = Interval(float(lo), float(hi), "ci", method, k, confidence)
        verdict = SIGNIFICANT if iv.excludes_zero() else STRADDLES_ZERO
    test = mann_whitney(a.unit_values(), b.unit_values())
    return Comparison(a.label, b.label, a.unit, q, av, bv, delta, iv, verdict, test, *units)


def ratio(a: Measurement, b: Measurement, *, paired: bool = True) -> Measurement:
    """``a / b`` (e.g. speedup = eager / deferred). Paired: one ratio per unit id present in
    both (repeat i of A over repeat i of B; per-unit medians when units hold several
    samples). Unpaired: a single sample, median(a) / median(b)."""
    label = f"{a.label or 'A'} / {b.label or 'B'}"
    if not paired:
        r = a.median / b.median if b.n and b.median else math.nan
        return Measurement([] if math.isnan(r) else [r], "x", label + " (medians, unpaired)")
    va = dict(zip(a.unit_keys, a.unit_values(), strict=True))
    vb = dict(zip(b.unit_keys, b.unit_values(), strict=True))
    common = [u for u in va if u in vb]
    if a.n and b.n and not common:
        raise ValueError(f"cannot pair {label}: no unit id is present on both sides")
    pairs = [(u, va[u] / vb[u]) for u in common if vb[u]]
    return Measurement([r for _, r in pairs], "x", label, [u for u, _ in pairs])
