"""Statistics over the raw samples of one quantity: Measurement objects and intervals.

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
    percentile(samples, q), median(samples), pct_delta(a, b)
    cluster_bootstrap(groups, q, rng, resamples): the resampling behind every interval

The rest of the statistics, one module each:

    compare           compare(a, b, *, q=50.0, confidence=0.95, resamples=2000, seed=0)
                      -> Comparison (.a_value .b_value .delta_pct .interval .verdict
                      .significant .test .a_units .b_units .as_dict());
                      ratio(a, b, *, paired=True) -> Measurement (a / b, e.g. speedup)
    rank_test         mann_whitney(x, y, alternative="two-sided") -> RankTest(p_value,
                      method, u, alternative, n_x, n_y) ("greater": x tends to be larger
                      than y; the gate's one-sided test)
    launches          rerun_interval(samples, launches, confidence=0.95) -> (Interval, Spread):
                      a prediction interval for a re-run's median, from the spread between
                      process launches and within them (two-level bootstrap)
    difference        difference(a, b) -> Difference (.value .interval: unpaired a - b, e.g.
                      an arm minus its control); ratio_of_differences(a, a_ref, b, b_ref)
                      -> (value, Interval) (e.g. a speedup on payload cost)
    format            fmt_pct(x), fmt_ms(x), fmt_speedup(r), fmt_speedup_range(lo, hi)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypedDict

import numpy as np

from kimi_bench.infra.stats.format import fmt_pct

# Noise rule and thresholds as in torch.utils.benchmark (torch/utils/benchmark/utils/common.py,
# _IQR_WARN_THRESHOLD = 0.1 and _IQR_GROSS_WARN_THRESHOLD = 0.25; Measurement warns when
# IQR / median is not below them).
NOISE_WARN = 0.10
NOISE_GROSS = 0.25
MIN_UNITS = 3  # fewer independent units per side: no confidence interval, never significant
RESAMPLES = 2000


def percentile(samples: Sequence[float] | np.ndarray, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's and torch.quantile's default)."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    if len(samples) == 0:
        return math.nan
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q))


def cluster_bootstrap(
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


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 50.0)


def pct_delta(a: float, b: float) -> float:
    """Signed percentage B minus A relative to A: ``(b - a) / |a| * 100`` (NaN when a is 0)."""
    if not a or math.isnan(a) or math.isnan(b):
        return math.nan
    return (b - a) / abs(a) * 100.0


class MedianDoc(TypedDict, total=False):
    """``Measurement.median_doc``: a median and its interval (empty without samples)."""

    median: float
    interval: IntervalDoc


class IntervalDoc(TypedDict):
    """``Interval.as_dict``: its fields."""

    low: float
    high: float
    kind: str
    method: str
    n_units: int
    confidence: float | None
    reason: str


@dataclass(frozen=True)
class Interval:
    """An interval of a statistic. ``kind`` is ``"ci"`` (percentile bootstrap over >=
    ``MIN_UNITS`` independent units), ``"prediction"`` (where a re-run's median falls, from
    the spread between process launches and within them: ``stats.launches``; ``n_units``
    counts launches), ``"range"`` (min..max, NOT a confidence interval) or ``"none"``
    (nothing to show; ``reason`` says why)."""

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
        if self.kind == "prediction":
            return (
                f"{lo} .. {hi} ({(self.confidence or 0):.0%} re-run interval over "
                f"{self.n_units} launches)"
            )
        return f"{lo} .. {hi} (range over {self.n_units} units, not a confidence interval)"

    def as_dict(self) -> IntervalDoc:
        return IntervalDoc(low=self.low, high=self.high, kind=self.kind, method=self.method,
                           n_units=self.n_units, confidence=self.confidence,
                           reason=self.reason)  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Interval:
        """Reads ``as_dict()`` back, also after JSON turned NaN bounds into null."""
        bounds = {k: math.nan if d.get(k) is None else float(d[k]) for k in ("low", "high")}
        return cls(**(dict(d) | bounds))


def no_interval(n_units: int, reason: str) -> Interval:
    """An interval with nothing to show; ``reason`` says why."""
    return Interval(math.nan, math.nan, "none", "", n_units, None, reason)


def check_interval_args(q: float, confidence: float, resamples: int) -> None:
    """ValueError unless the interval's percentile, confidence and resample count are usable."""
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
    def unit_keys(self) -> list[Hashable]:
        """Unit ids in order of first appearance (sample indices when none were given)."""
        return list(dict.fromkeys(range(self.n) if self.unit_ids is None else self.unit_ids))

    @cached_property
    def unit_groups(self) -> list[np.ndarray]:
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
        return len(self.unit_groups)

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
        return [percentile(g, q) for g in self.unit_groups]

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
        check_interval_args(q, confidence, resamples)
        k = self.n_units
        if k == 0:
            return no_interval(0, "no samples")
        if k < MIN_UNITS:
            why = f"{k} independent unit(s) < {MIN_UNITS}: not a confidence interval"
            return Interval(self.min, self.max, "range", "min..max of samples", k, None, why)
        method = bootstrap_method(self)
        stats = cluster_bootstrap(self.unit_groups, q, np.random.default_rng(seed), resamples)
        tail = (1 - confidence) / 2 * 100
        lo, hi = np.percentile(stats, [tail, 100 - tail])
        return Interval(float(lo), float(hi), "ci", method, k, confidence)

    def median_doc(self) -> MedianDoc:
        """The median and its interval (``interval()``'s defaults); empty without samples."""
        return MedianDoc(median=self.median, interval=self.interval().as_dict()) if self.n else {}

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


def bootstrap_method(m: Measurement) -> str:
    """The interval's ``method`` words: resampling samples, or units holding several."""
    what = "samples" if m.unit_ids is None else "units (clusters)"
    return f"percentile bootstrap over {what}"
