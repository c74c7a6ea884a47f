"""Statistics over raw samples: Measurement objects, intervals, A/B comparisons, rank tests.

Conventions (used by every report, gate and compare):

- Raw samples are kept; every summary is derived from them on demand.
- Percentages are signed and mean B minus A: ``pct_delta(a, b) = (b - a) / |a| * 100``
  (A is the reference, e.g. eager or the baseline; B the candidate, e.g. deferred).
- Times are milliseconds and their names end in ``_ms``; a serialized Measurement carries
  its unit in ``"unit"``, so the key that holds it names the unit (``"total_ms": {...}``).
- Independent units: samples that share a unit id (e.g. the serve-ab requests served in one
  forward batch) are one observation. Intervals resample units, not samples (cluster
  bootstrap), and nothing is called a confidence interval or significant with fewer than
  ``MIN_UNITS`` independent units (per side).

Public API::

    Measurement(samples, unit="ms", label="", unit_ids=None)
        .n .n_units .median .mean .p10 .p25 .p75 .p90 .iqr .min .max .noise .noisy
        .warnings .unit_values(q=50.0) .interval(confidence=0.95, *, q=50.0,
        resamples=2000, seed=0) -> Interval   .as_dict()   Measurement.from_dict(d)
    Interval(low, high, kind, method, n_units, confidence=None, reason="")
        .is_ci .excludes_zero() .fmt(pct=False, unit="") .as_dict() .from_dict(d)
    compare(a, b, *, q=50.0, confidence=0.95, resamples=2000, seed=0) -> Comparison
        Comparison: .a_value .b_value .delta_pct .interval .verdict .significant
            .test (RankTest, two-sided, on per-unit values) .a_units .b_units .as_dict()
    difference(a, b, *, q=50.0, ...) -> Difference (.value .interval; unpaired a - b, e.g.
        an arm's time minus its control's)
    ratio_of_differences(a, a_ref, b, b_ref, ...) -> (value, Interval)  ((a - a_ref) / (b -
        b_ref) of percentiles, e.g. a speedup on payload cost; a, b paired by unit id)
    ratio(a, b, *, paired=True) -> Measurement        (a / b, e.g. speedup eager / deferred)
    mann_whitney(x, y, alternative="two-sided") -> RankTest(p_value, method, u, alternative,
        n_x, n_y)      ("greater": x tends to be larger than y; the gate's one-sided test)
    percentile(samples, q), median(samples), pct_delta(a, b), fmt_pct(x), fmt_ms(x)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy import stats as _scipy_stats

# Noise rule and thresholds as in torch.utils.benchmark (torch/utils/benchmark/utils/common.py,
# _IQR_WARN_THRESHOLD = 0.1 and _IQR_GROSS_WARN_THRESHOLD = 0.25; Measurement warns when
# IQR / median is not below them).
NOISE_WARN = 0.10
NOISE_GROSS = 0.25
MIN_UNITS = 3  # fewer independent units per side: no confidence interval, never significant
RESAMPLES = 2000
EXACT_MAX_N = 50  # Mann-Whitney: exact p-values up to this many values per side, when no ties

SIGNIFICANT = "significant"
STRADDLES_ZERO = "interval straddles zero"
TOO_FEW_UNITS = "not enough independent samples"


def percentile(samples: Sequence[float] | np.ndarray, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's and torch.quantile's default)."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    if len(samples) == 0:
        return math.nan
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q))


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 50.0)


def pct_delta(a: float, b: float) -> float:
    """Signed percentage B minus A relative to A: ``(b - a) / |a| * 100`` (NaN when a is 0)."""
    if not a or math.isnan(a) or math.isnan(b):
        return math.nan
    return (b - a) / abs(a) * 100.0


def fmt_pct(x: float | None, digits: int = 1) -> str:
    """``+12.3%``; the sign is always shown; ``n/a`` for None, NaN and infinities."""
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.{digits}f}%"


def fmt_speedup(ratio: float | None, versus: str = "", digits: int = 2) -> str:
    """A time ratio ``base / arm`` in plain words: 1.23 -> ``1.23x faster``, 0.813 ->
    ``1.23x slower`` (never "0.81x faster"); with ``versus``: ``1.23x slower than eager``,
    ``as fast as eager (1.00x)`` when the factor rounds to 1."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return "n/a"
    factor = ratio if ratio >= 1 else 1.0 / ratio
    if round(factor, digits) == 1:
        return f"as fast as {versus} (1.{'0' * digits}x)" if versus else "as fast (1.00x)"
    word = "faster" if ratio > 1 else "slower"
    return f"{factor:.{digits}f}x {word}" + (f" than {versus}" if versus else "")


def fmt_speedup_range(low: float, high: float, digits: int = 2) -> str:
    """An interval of such ratios: ``1.10-1.35x faster``, ``1.10-1.35x slower`` (both ends
    below 1) or, when it spans 1, ``1.10x slower to 1.05x faster``."""
    if not (math.isfinite(low) and math.isfinite(high)) or min(low, high) <= 0:
        return "n/a"
    low, high = min(low, high), max(low, high)
    if low >= 1:
        return f"{low:.{digits}f}-{high:.{digits}f}x faster"
    if high <= 1:
        return f"{1 / high:.{digits}f}-{1 / low:.{digits}f}x slower"
    return f"{1 / low:.{digits}f}x slower to {high:.{digits}f}x faster"


def fmt_ms(x: float | None) -> str:
    """Milliseconds with a precision that fits the size: ``123 ms``, ``12.3 ms``, ``1.23 ms``."""
    if x is None or not math.isfinite(x):
        return "n/a"
    digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 0.01 else 4
    return f"{x:.{digits}f} ms"


@dataclass(frozen=True)
class Interval:
    """An interval of a statistic. ``kind`` is ``"ci"`` (percentile bootstrap over >=
    ``MIN_UNITS`` independent units), ``"range"`` (min..max, NOT a confidence interval) or
    ``"none"`` (nothing to show; ``reason`` says why)."""

    low: float
    high: float
    kind: str
    method: str
    n_units: int
    confidence: float | None = None
    reason: str = ""

    @property
    def is_ci(self) -> bool:
        return self.kind == "ci"

    def excludes_zero(self) -> bool:
        return self.kind != "none" and (self.low > 0 or self.high < 0)

    def fmt(self, pct: bool = False, unit: str = "") -> str:
        """``+1.2% .. +3.4% (95% CI over 12 units)``, ``10 .. 12 ms (range over 2 units, not
        a confidence interval)``, or ``n/a (reason)``."""
        if self.kind == "none":
            return f"n/a ({self.reason})" if self.reason else "n/a"
        if pct:
            lo, hi = fmt_pct(self.low), fmt_pct(self.high)
        else:
            lo, hi = f"{self.low:.4g}", f"{self.high:.4g}" + (f" {unit}" if unit else "")
        if self.kind == "ci":
            return f"{lo} .. {hi} ({(self.confidence or 0):.0%} CI over {self.n_units} units)"
        return f"{lo} .. {hi} (range over {self.n_units} units, not a confidence interval)"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Interval:
        """Reads ``as_dict()`` back, also after JSON turned NaN bounds into null."""
        bounds = {k: math.nan if d.get(k) is None else float(d[k]) for k in ("low", "high")}
        return cls(**(dict(d) | bounds))


def _no_interval(n_units: int, reason: str) -> Interval:
    return Interval(math.nan, math.nan, "none", "", n_units, None, reason)


def _check_interval_args(q: float, confidence: float, resamples: int) -> None:
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")


_QUANTILES = {"p10": 10, "p25": 25, "median": 50, "p75": 75, "p90": 90}
_DERIVED = ("n", "n_units", "median", "mean", *_QUANTILES, "iqr", "min", "max", "noise")


class _Stat:
    """A summary read from ``Measurement._summary`` (computed once, on first use)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Measurement | None, objtype: type | None = None) -> float:
        if obj is None:
            raise AttributeError(f"{self.name} is a per-instance summary")
        return obj._summary[self.name]


@dataclass(frozen=True)
class Measurement:
    """Raw samples of one quantity, with summaries derived on demand (cached).

    ``unit`` is the measurement unit (``"ms"``, ``"req/s"``, ``"x"``). ``unit_ids``, one per
    sample, names the independent unit each sample belongs to (e.g. the forward batch a
    request was served in; ids must be unique across repeats, e.g. ``(repeat, batch)``); by
    default every sample is its own unit (e.g. micro repeats)."""

    samples: Sequence[float]
    unit: str = "ms"
    label: str = ""
    unit_ids: Sequence[Hashable] | None = None

    def __post_init__(self) -> None:
        xs = tuple(float(x) for x in self.samples)
        if not all(math.isfinite(x) for x in xs):
            raise ValueError(f"{self.label or 'measurement'}: samples must be finite numbers")
        object.__setattr__(self, "samples", xs)
        if self.unit_ids is not None:  # JSON turns tuple ids such as (repeat, batch) into lists
            ids = tuple(tuple(u) if isinstance(u, list) else u for u in self.unit_ids)
            if len(ids) != len(xs):
                raise ValueError(
                    f"{self.label or 'measurement'}: {len(ids)} unit ids for {len(xs)} samples"
                )
            object.__setattr__(self, "unit_ids", ids)

    @cached_property
    def _sorted(self) -> np.ndarray:
        return np.sort(np.asarray(self.samples, dtype=np.float64))

    @property
    def _unit_keys(self) -> list[Hashable]:
        """Unit ids in order of first appearance (sample indices when none were given)."""
        return list(dict.fromkeys(range(self.n) if self.unit_ids is None else self.unit_ids))

    @cached_property
    def _groups(self) -> list[np.ndarray]:
        """Samples grouped by unit id, units in order of first appearance."""
        if self.unit_ids is None:
            return [np.array([x]) for x in self.samples]
        groups: dict[Hashable, list[float]] = {}
        for uid, x in zip(self.unit_ids, self.samples, strict=True):
            groups.setdefault(uid, []).append(x)
        return [np.asarray(g, dtype=np.float64) for g in groups.values()]

    @cached_property
    def _summary(self) -> dict[str, float]:
        if not self.n:
            return dict.fromkeys(("mean", "min", "max", *_QUANTILES), math.nan)
        qs = np.percentile(self._sorted, list(_QUANTILES.values()))
        out = {k: float(v) for k, v in zip(_QUANTILES, qs, strict=True)}
        xs = self._sorted
        return out | {"mean": float(xs.mean()), "min": float(xs[0]), "max": float(xs[-1])}

    median, mean, p10, p25, p75, p90 = _Stat(), _Stat(), _Stat(), _Stat(), _Stat(), _Stat()
    min, max = _Stat(), _Stat()

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def n_units(self) -> int:
        return len(self._groups)

    @property
    def iqr(self) -> float:
        return self.p75 - self.p25

    @property
    def noise(self) -> float:
        """IQR / |median|, the relative spread torch.utils.benchmark warns on."""
        return self.iqr / abs(self.median) if self.n and self.median else math.nan

    @property
    def noisy(self) -> bool:
        return self.noise >= NOISE_WARN  # False for NaN

    @property
    def warnings(self) -> tuple[str, ...]:
        name, out = self.label or "measurement", []
        if self.noise >= NOISE_GROSS:
            why = "this suggests significant environmental influence"
            out.append(f"{name}: IQR is {self.noise:.1%} of the median (>= 25%): {why}")
        elif self.noise >= NOISE_WARN:
            why = "this could indicate system fluctuation"
            out.append(f"{name}: IQR is {self.noise:.1%} of the median (>= 10%): {why}")
        if 0 < self.n_units < MIN_UNITS:
            out.append(
                f"{name}: only {self.n_units} independent unit(s): no confidence interval "
                f"(needs >= {MIN_UNITS})"
            )
        return tuple(out)

    def unit_values(self, q: float = 50.0) -> list[float]:
        """The ``q`` percentile of each independent unit (the sample itself by default)."""
        return [percentile(g, q) for g in self._groups]

    def interval(
        self,
        confidence: float = 0.95,
        *,
        q: float = 50.0,
        resamples: int = RESAMPLES,
        seed: int = 0,
    ) -> Interval:
        """Interval of the ``q`` percentile: a seeded percentile bootstrap over independent
        units with >= MIN_UNITS units; the min..max range (not a CI) below that."""
        _check_interval_args(q, confidence, resamples)
        k = self.n_units
        if k == 0:
            return _no_interval(0, "no samples")
        if k < MIN_UNITS:
            why = f"{k} independent unit(s) < {MIN_UNITS}: not a confidence interval"
            return Interval(self.min, self.max, "range", "min..max of samples", k, None, why)
        stats = _bootstrap(self._groups, q, np.random.default_rng(seed), resamples)
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(stats, [tail, 100 - tail])
        return Interval(float(lo), float(hi), "ci", _method(self), k, confidence)

    def as_dict(self) -> dict[str, Any]:
        """Raw samples plus derived summaries (from_dict reads back only the raw part)."""
        raw = {"label": self.label, "unit": self.unit, "samples": list(self.samples)}
        ids = {} if self.unit_ids is None else {"unit_ids": list(self.unit_ids)}
        derived = {k: getattr(self, k) for k in _DERIVED}
        return raw | ids | derived | {"warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, unit: str = "ms", label: str = "") -> Measurement:
        """Read ``as_dict()`` output back; also reads older report blocks that hold
        ``"samples"`` or ``"samples_ms"`` and no unit (``unit``/``label`` fill the gaps)."""
        if "samples" not in d and "samples_ms" not in d:
            raise ValueError(f"no 'samples' in the measurement block (keys: {', '.join(d)})")
        samples = d["samples"] if "samples" in d else d["samples_ms"]
        unit = d.get("unit", unit if "samples" in d else "ms")
        return cls(samples, unit, d.get("label", label), d.get("unit_ids"))


def _method(m: Measurement) -> str:
    what = "samples" if m.unit_ids is None else "units (clusters)"
    return f"percentile bootstrap over {what}"


def _bootstrap(
    groups: list[np.ndarray], q: float, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """The ``q`` percentile of each of ``resamples`` cluster-bootstrap resamples: draw
    ``len(groups)`` units with replacement and pool their samples."""
    k = len(groups)
    picks = rng.integers(0, k, size=(resamples, k))
    if all(len(g) == 1 for g in groups):
        return np.percentile(np.concatenate(groups)[picks], q, axis=1)
    # Without building the pooled resamples: a unit drawn c times weighs c on each of its
    # samples; with the samples sorted, the expanded position j is held by the first sample
    # whose cumulative weight exceeds j (numpy's linear rule on the pooled resample).
    counts = np.zeros((resamples, k), dtype=np.int64)
    np.add.at(counts, (np.arange(resamples)[:, None], picks), 1)
    xs = np.concatenate(groups)
    owner = np.repeat(np.arange(k), [len(g) for g in groups])
    order = np.argsort(xs, kind="stable")
    xs, owner = xs[order], owner[order]
    cum = np.cumsum(counts[:, owner], axis=1)
    pos = (cum[:, -1] - 1) * q / 100.0
    lo = np.floor(pos)
    hi = np.minimum(lo + 1, cum[:, -1] - 1)
    i_lo, i_hi = (cum <= lo[:, None]).sum(axis=1), (cum <= hi[:, None]).sum(axis=1)
    return xs[i_lo] + (xs[i_hi] - xs[i_lo]) * (pos - lo)


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U of ``x`` against ``y``; ``u`` is the U statistic of ``x``."""

    p_value: float
    method: str  # "exact", "asymptotic" or "none" (an empty side)
    u: float
    alternative: str
    n_x: int
    n_y: int


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
    res = _scipy_stats.mannwhitneyu(xs, ys, alternative=alternative, method=method)
    return RankTest(float(res.pvalue), method, float(res.statistic), alternative, xs.size, ys.size)


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

    def as_dict(self) -> dict[str, Any]:
        """Fields (interval and test as nested dicts) plus ``significant``."""
        return asdict(self) | {"significant": self.significant}


def _too_few(a: Measurement, b: Measurement, delta: float) -> Interval:
    """Range of the per-unit deltas over every (A unit, B unit) pair; not a CI."""
    why = (
        f"{TOO_FEW_UNITS}: A has {a.n_units}, B has {b.n_units} independent unit(s) "
        f"(needs >= {MIN_UNITS} each)"
    )
    if not a.n or not b.n or math.isnan(delta):
        return _no_interval(min(a.n_units, b.n_units), why)
    deltas = [pct_delta(x, y) for x in a.unit_values() for y in b.unit_values()]
    deltas = [d for d in deltas if math.isfinite(d)]
    if not deltas:
        return _no_interval(min(a.n_units, b.n_units), why)
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
    _check_interval_args(q, confidence, resamples)
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
        iv = _no_interval(k, verdict)
    else:
        rng = np.random.default_rng(seed)
        sa = _bootstrap(a._groups, q, rng, resamples)
        sb = _bootstrap(b._groups, q, rng, resamples)
        with np.errstate(divide="ignore", invalid="ignore"):
            ds = (sb - sa) / np.abs(sa) * 100.0
        ds = ds[np.isfinite(ds)]
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(ds, [tail, 100 - tail]) if ds.size else (math.nan, math.nan)
        ma, mb = _method(a), _method(b)
        method = f"{ma}, both sides" if ma == mb else f"{ma} (A), {mb} (B)"
        iv = Interval(float(lo), float(hi), "ci", method, k, confidence)
        verdict = SIGNIFICANT if iv.excludes_zero() else STRADDLES_ZERO
    test = mann_whitney(a.unit_values(), b.unit_values())
    return Comparison(a.label, b.label, a.unit, q, av, bv, delta, iv, verdict, test, *units)


@dataclass(frozen=True)
class Difference:
    """A's ``q`` percentile minus B's, in their unit (e.g. an arm's time minus its
    control's: the payload cost), with its interval."""

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
    _check_interval_args(q, confidence, resamples)
    if a.unit != b.unit:
        raise ValueError(f"cannot subtract {b.unit!r} from {a.unit!r}")
    value = percentile(a.samples, q) - percentile(b.samples, q)
    k = min(a.n_units, b.n_units)
    if not a.n or not b.n:
        return Difference(math.nan, a.unit, _no_interval(k, "no samples on one side"))
    if k < MIN_UNITS:
        why = f"{TOO_FEW_UNITS}: A has {a.n_units}, B has {b.n_units} (needs >= {MIN_UNITS})"
        ds = [x - y for x in a.unit_values(q) for y in b.unit_values(q)]
        iv = Interval(min(ds), max(ds), "range", "min..max of per-unit differences", k, None, why)
        return Difference(value, a.unit, iv)
    rng = np.random.default_rng(seed)
    ds = _bootstrap(a._groups, q, rng, resamples) - _bootstrap(b._groups, q, rng, resamples)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ds, [tail, 100 - tail])
    method = f"{_method(a)}, both sides independently"
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
    _check_interval_args(q, confidence, resamples)
    va = dict(zip(a._unit_keys, a.unit_values(q), strict=True))
    vb = dict(zip(b._unit_keys, b.unit_values(q), strict=True))
    ids = [u for u in va if u in vb]
    xa, xb = np.array([va[u] for u in ids]), np.array([vb[u] for u in ids])
    # the point value from every sample (as each difference alone); pairs drive the resamples
    num = percentile(a.samples, q) - percentile(a_ref.samples, q)
    den = percentile(b.samples, q) - percentile(b_ref.samples, q)
    k = min(len(ids), a_ref.n_units, b_ref.n_units)
    if not (num > 0 and den > 0):
        return math.nan, _no_interval(k, "a difference is not above zero: no ratio")
    value = num / den
    if k < MIN_UNITS:
        return value, _no_interval(k, f"{TOO_FEW_UNITS} ({k} < {MIN_UNITS})")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(ids), size=(resamples, len(ids)))
    nums = np.percentile(xa[picks], q, axis=1) - _bootstrap(a_ref._groups, q, rng, resamples)
    dens = np.percentile(xb[picks], q, axis=1) - _bootstrap(b_ref._groups, q, rng, resamples)
    tail = (1 - confidence) / 2
    if np.mean(dens <= 0) > tail or np.mean(nums <= 0) > tail:
        return value, _no_interval(k, "a difference reaches zero in the resamples: unbounded")
    with np.errstate(divide="ignore", invalid="ignore"):
        rs = np.where(dens > 0, nums / dens, np.inf)
    lo, hi = np.percentile(rs, [tail * 100, 100 - tail * 100])
    method = "percentile bootstrap: paired units of A and B, references independently"
    return value, Interval(float(lo), float(hi), "ci", method, k, confidence)


def ratio(a: Measurement, b: Measurement, *, paired: bool = True) -> Measurement:
    """``a / b`` (e.g. speedup = eager / deferred). Paired: one ratio per unit id present in
    both (repeat i of A over repeat i of B; per-unit medians when units hold several
    samples). Unpaired: a single sample, median(a) / median(b)."""
    label = f"{a.label or 'A'} / {b.label or 'B'}"
    if not paired:
        r = a.median / b.median if b.n and b.median else math.nan
        return Measurement([] if math.isnan(r) else [r], "x", label + " (medians, unpaired)")
    va = dict(zip(a._unit_keys, a.unit_values(), strict=True))
    vb = dict(zip(b._unit_keys, b.unit_values(), strict=True))
    common = [u for u in va if u in vb]
    if a.n and b.n and not common:
        raise ValueError(f"cannot pair {label}: no unit id is present on both sides")
    pairs = [(u, va[u] / vb[u]) for u in common if vb[u]]
    return Measurement([r for _, r in pairs], "x", label, [u for u, _ in pairs])
