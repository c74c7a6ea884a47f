"""Intervals that hold across process launches: a prediction interval for a re-run's median.

A run measures in several independent process launches, each with its warm-up and its
repeats. Repeats of one launch share what that launch drew (its memory layout, where its
processes landed, the host's load while it ran); resampling the repeats of one launch
promises nothing about the next launch. ``rerun_interval`` takes every sample with the
launch it came from and answers where the median of a re-run (as many launches, as many
repeats each) falls:

1. a two-level bootstrap of the pooled median: draw the launches with replacement, then
   the repeats within each drawn launch, and take the pooled median; its variance is the
   run's sampling variance (between and within launches together);
2. the same with the launches kept and only the repeats redrawn: the within-launch part;
   the between-launch part is what the launch medians' own variance (over L) adds to it
   (never below zero); the larger part "dominates";
3. the re-run is another draw as uncertain as this one, so the difference of the two
   medians has twice the variance; with few launches the variance itself is uncertain,
   so the half-width takes Student's t with ``launches - 1`` degrees of freedom (and the
   bootstrap's ``(L - 1) / L`` shrinkage of a between-launch variance is undone):

       median +- t(L - 1) * sqrt(2 * var_two_level * L / (L - 1))

With one launch there is no between-launch spread to measure: the answer is the
within-launch bootstrap CI (``Measurement.interval``), which says nothing about a re-run,
and its reason says so.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import TypedDict

import numpy as np

from kimi_bench.infra.stats import (
    RESAMPLES,
    Interval,
    Measurement,
    check_interval_args,
    no_interval,
    percentile,
)

PREDICTION = "prediction"  # Interval.kind of a re-run interval
BETWEEN, WITHIN = "between launches", "within launches"
ONE_LAUNCH = (
    "one launch: the spread between process launches is not measured; this CI resamples "
    "the repeats of one launch and promises nothing about a re-run"
)


class SpreadDoc(TypedDict):
    """``Spread.as_dict``: where the spread of the median comes from."""

    launches: int
    samples: int
    launch_medians: list[float]
    between_var: float
    within_var: float
    between_share: float
    dominant: str


@dataclass(frozen=True)
class Spread:
    """The variance of the pooled median split into its between-launch and within-launch
    parts (two-level bootstrap), the launches' own medians and which part dominates."""

    launches: int
    samples: int
    launch_medians: tuple[float, ...]
    between_var: float
    within_var: float

    @property
    def between_share(self) -> float:
        total = self.between_var + self.within_var
        return self.between_var / total if total > 0 else 0.0

    @property
    def dominant(self) -> str:
        if self.launches < 2:
            return "unknown (one launch)"
        return BETWEEN if self.between_var > self.within_var else WITHIN

    def as_dict(self) -> SpreadDoc:
        return SpreadDoc(
            launches=self.launches, samples=self.samples,
            launch_medians=list(self.launch_medians), between_var=self.between_var,
            within_var=self.within_var, between_share=self.between_share,
            dominant=self.dominant,
        )  # fmt: skip


def _groups(samples: Sequence[float], launches: Sequence[Hashable]) -> list[np.ndarray]:
    if len(samples) != len(launches):
        raise ValueError(f"{len(launches)} launch ids for {len(samples)} samples")
    by: dict[Hashable, list[float]] = {}
    for lid, x in zip(launches, samples, strict=True):
        by.setdefault(lid, []).append(float(x))
    return [np.asarray(g, dtype=np.float64) for g in by.values()]


def _two_level(
    groups: list[np.ndarray], rng: np.random.Generator, resamples: int, redraw: bool
) -> np.ndarray:
    """Pooled medians of ``resamples`` resamples: the launches drawn with replacement
    (``redraw``) or kept as they are, then the repeats within each drawn launch."""
    k = len(groups)
    sizes = np.array([len(g) for g in groups])
    width = int(sizes.max())
    table = np.full((k, width), np.nan)
    for i, g in enumerate(groups):
        table[i, : len(g)] = g
    picks = (
        rng.integers(0, k, size=(resamples, k)) if redraw else np.tile(np.arange(k), (resamples, 1))
    )
    n = sizes[picks][:, :, None]  # the drawn launch's repeat count
    inner = np.floor(rng.random((resamples, k, width)) * n).astype(np.int64)
    values = table[picks[:, :, None], inner]
    values[np.arange(width)[None, None, :] >= n] = np.nan  # a shorter launch's padding
    return np.nanmedian(values.reshape(resamples, k * width), axis=1)


def spread(
    samples: Sequence[float],
    launches: Sequence[Hashable],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[Spread, np.ndarray]:
    """The spread of the pooled median (``Spread``) and the two-level bootstrap replicates."""
    groups = _groups(samples, launches)
    rng = np.random.default_rng(seed)
    both = _two_level(groups, rng, resamples, redraw=True)
    within = _two_level(groups, rng, resamples, redraw=False)
    var_within = float(np.var(within, ddof=1))
    medians = [float(np.median(g)) for g in groups]
    # the launch medians vary by the between-launch spread plus each one's own within
    # noise (about L x the pooled median's): what is left over is between launches
    k = len(groups)
    var_medians = float(np.var(medians, ddof=1)) if k > 1 else 0.0
    return (
        Spread(
            launches=k,
            samples=len(samples),
            launch_medians=tuple(medians),
            between_var=max(0.0, var_medians / k - var_within),
            within_var=var_within,
        ),
        both,
    )


def rerun_interval(
    samples: Sequence[float],
    launches: Sequence[Hashable],
    confidence: float = 0.95,
    *,
    log: bool = False,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[Interval, Spread]:
    """Where a re-run's median falls (``confidence``), from ``samples`` and the launch each
    came from (``launches``, one id per sample): kind ``"prediction"`` with >= 2 launches;
    with one launch the within-launch bootstrap CI, whose reason says it is no more.
    ``log``: positive samples such as ratios, spread in log space (the interval is the
    median times and over a factor, never below zero; ``Spread`` in log units)."""
    check_interval_args(50.0, confidence, resamples)
    if not samples:
        return no_interval(0, "no samples"), Spread(0, 0, (), math.nan, math.nan)
    if log and min(samples) <= 0:
        raise ValueError("a log-scale interval needs positive samples")
    logs = [math.log(x) for x in samples] if log else samples
    sp, both = spread(logs, launches, resamples=resamples, seed=seed)
    k = sp.launches
    if k < 2:
        ci = Measurement(samples, "x").interval(confidence, resamples=resamples, seed=seed)
        why = f"{ci.reason}; {ONE_LAUNCH}" if ci.reason else ONE_LAUNCH
        return Interval(ci.low, ci.high, ci.kind, ci.method, ci.n_units, ci.confidence, why), sp
    center = percentile(samples, 50.0)
    var = float(np.var(both, ddof=1)) * k / (k - 1)
    # scipy.stats.t.ppf is scipy.special.stdtrit (the same numbers): scipy.special alone,
    # imported here, costs a command that reads a report a third of scipy.stats' import
    from scipy.special import stdtrit

    t = float(stdtrit(k - 1, (1 + confidence) / 2))
    half = t * math.sqrt(2 * var)
    low, high = (center * math.exp(-half), center * math.exp(half)) if log else (
        center - half, center + half)  # fmt: skip
    method = (
        f"prediction interval for a re-run's median: two-level bootstrap (launches, then "
        f"repeats within each) over {k} launches of {len(samples)} samples"
        + (" in log space" if log else "")
        + f", t({k - 1}) * sqrt(2 x variance)"
    )
    return Interval(low, high, PREDICTION, method, k, confidence), sp


def speedup_interval(
    samples: Sequence[float], launches: Sequence[Hashable]
) -> tuple[Interval, Spread]:
    """The interval of a speedup's median (per-repeat ratios, each with its launch): the
    re-run interval in log space. The report, its read-back check and the gate's evidence
    all call this one."""
    sp_iv, sp = rerun_interval(samples, launches, log=True)
    return sp_iv, replace(
        sp, launch_medians=tuple(float(np.median(g)) for g in _groups(samples, launches))
    )
