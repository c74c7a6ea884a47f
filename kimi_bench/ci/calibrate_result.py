"""What ``calibrate`` found: per metric the threshold chosen in sample, its rates in sample
and out of sample (per carrier too), the rates of the thresholds the rules file states,
and the smallest effect the gate can detect across machines (``ci.calibrate``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel
from scipy.stats import beta

from kimi_bench.ci.calibrate import (
    GateCounts,
    PairOutcome,
    RuleCount,
    Scored,
    absolute_rates,
    gate_counts,
    metrics_of,
    pairs_for,
    score,
    smallest_effect,
    smallest_threshold,
)
from kimi_bench.ci.calibrate_pairs import CALIBRATION, Run, setup_text
from kimi_bench.ci.rules import BaselineRules, GateRules

Limit = Callable[[str], float]  # carrier -> threshold


class Scores(BaseModel):
    """One set of pairs scored (``calibration.json``): the rates at a threshold (absent
    without one), whether both out-of-sample targets hold, the smallest slowdown caught,
    the smallest threshold that holds and the rates there, and the same per carrier. Only
    the fields given are written (``model_dump(exclude_unset=True)``)."""

    pairs: int | None = None
    aa_failures: int | None = None
    aa_failure_rate: float | None = None
    aa_failure_rate_upper_95: float | None = None
    detected: int | None = None
    detection_rate: float | None = None
    holds: bool | None = None
    smallest_effect: float | None = None
    smallest_holding_threshold: float | None = None
    at_smallest_holding: Scores | None = None
    per_carrier: dict[str, Scores] | None = None


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float | None:
    """One-sided Clopper-Pearson upper bound of a rate seen as ``k`` of ``n``: how high the
    true A/A failure rate may still be (0 of 12 leaves up to 22%)."""
    if not n:
        return None
    return 1.0 if k >= n else float(beta.ppf(confidence, k + 1, n - k))


def rates(s: Scored, limit: Limit, alpha: float) -> Scores:
    n = len(s.aa)
    false = sum(o.fails(limit(c), alpha) for o, c in zip(s.aa, s.carriers, strict=True))
    caught = sum(o.fails(limit(c), alpha) for o, c in zip(s.injected, s.carriers, strict=True))
    return Scores(pairs=n, aa_failures=false, aa_failure_rate=false / n if n else None,
                  aa_failure_rate_upper_95=upper_bound(false, n), detected=caught,
                  detection_rate=caught / n if n else None)  # fmt: skip


def holds(r: Scores, oos_target: float, power: float) -> bool:
    """Both out-of-sample targets: A/A failures <= oos_target, detection >= power."""
    n, failed, caught = r.pairs or 0, r.aa_failures or 0, r.detected or 0
    return bool(n) and failed <= math.floor(oos_target * n + 1e-9) and caught >= math.ceil(
        power * n - 1e-9)  # fmt: skip


class PairRow(BaseModel):
    pair: str
    carrier: str
    setup: str
    aa: PairOutcome
    injected: PairOutcome


class Written(BaseModel):
    """The rules file's own thresholds (per carrier) and their rates."""

    thresholds: dict[str, float]
    in_sample: Scores
    out_of_sample: Scores


class MetricDoc(BaseModel):
    """One metric's figures in ``calibration.json``."""

    metric: str
    threshold: float | None
    in_sample: Scores
    out_of_sample: Scores
    as_written: Written
    pairs: dict[str, list[PairRow]]  # in_sample, out_of_sample


class GateDoc(BaseModel):
    """The whole gate at the in-sample thresholds and at the rules file's own."""

    in_sample: GateCounts
    out_of_sample: GateCounts
    as_written: dict[str, GateCounts]  # in_sample, out_of_sample


@dataclass
class Machine:
    """One machine's runs and what their reports say of where they ran."""

    runs: int = 0
    commits: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    platform: list[str] = field(default_factory=list)
    setups: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Settings:
    """What a calibration aims at (from ``CalibrateOptions``; no defaults here)."""

    slowdown: float  # the injected slowdown of the deferred arm
    target: float  # in sample: the largest A/A false-failure rate (chooses the thresholds)
    oos_target: float  # out of sample: the largest A/A false-failure rate
    power: float  # out of sample: the smallest detection rate
    alpha: float | None = None  # the rules' one-sided test level (set from the rules)

    @classmethod
    def from_options(cls, opts: Any) -> Settings:
        return cls(opts.slowdown, opts.target, opts.oos_target, opts.power)

    @property
    def level(self) -> float:
        if self.alpha is None:
            raise ValueError("Settings.alpha is set from the rules by calibrate()")
        return self.alpha


@dataclass
class MetricResult:
    metric: str
    in_sample: Scored
    out_of_sample: Scored
    threshold: float | None  # chosen in sample
    written: Limit  # the rules file's threshold for a carrier

    def _oos(self, s: Scored, limit: Limit | None, st: Settings) -> Scores:
        """Out-of-sample figures of ``s`` at ``limit`` and the smallest holding threshold."""
        out = Scores()
        if limit is not None:
            out = rates(s, limit, st.level)
            out.holds = holds(out, st.oos_target, st.power)
            out.smallest_effect = _effect(self.metric, s, limit, st)
        best = smallest_threshold(s, st.oos_target, st.level)
        out.smallest_holding_threshold = best
        if best is not None:
            at_best = rates(s, lambda c: best, st.level)
            at_best.smallest_effect = _effect(self.metric, s, lambda c: best, st)
            out.at_smallest_holding = at_best
        return out

    def _oos_per_carrier(self, limit: Limit | None, st: Settings) -> Scores:
        out = self._oos(self.out_of_sample, limit, st)
        carriers = sorted(set(self.out_of_sample.carriers))
        out.per_carrier = {c: self._oos(self.out_of_sample.subset(c), limit, st) for c in carriers}
        return out

    def doc(self, st: Settings) -> MetricDoc:
        t = self.threshold
        chosen: Limit | None = None if t is None else (lambda c: t)
        carriers = sorted(set(self.out_of_sample.carriers))
        ins = Scores(pairs=len(self.in_sample.aa))
        return MetricDoc(
            metric=self.metric,
            threshold=t,
            in_sample=rates(self.in_sample, chosen, st.level) if chosen else ins,
            out_of_sample=self._oos_per_carrier(chosen, st),
            as_written=Written(
                thresholds={c: self.written(c) for c in carriers},
                in_sample=rates(self.in_sample, self.written, st.level),
                out_of_sample=self._oos_per_carrier(self.written, st),
            ),
            pairs={
                "in_sample": _pair_rows(self.in_sample),
                "out_of_sample": _pair_rows(self.out_of_sample),
            },
        )


def _effect(metric: str, s: Scored, limit: Limit, st: Settings) -> float | None:
    """The smallest slowdown caught in ``power`` of the pairs, each carrier at its own
    threshold (the largest over carriers when the pairs mix them)."""
    found = [
        smallest_effect(s.subset(c), limit(c), st.level, st.power) for c in sorted(set(s.carriers))
    ]
    return None if not found or None in found else max(f for f in found if f is not None)


def _pair_rows(s: Scored) -> list[PairRow]:
    return [
        PairRow(pair=n, carrier=c, setup=setup_text(p.candidate.report), aa=a, injected=i)
        for n, c, p, a, i in zip(s.names, s.carriers, s.pairs, s.aa, s.injected, strict=True)
    ]


@dataclass
class Calibration:
    settings: Settings
    metrics: list[MetricResult]
    absolute: dict[str, RuleCount]
    machines: dict[str, Machine] = field(default_factory=dict)
    failed_runs: set[str] = field(default_factory=set)
    _docs: list[MetricDoc] | None = field(default=None, repr=False)

    def metric_docs(self) -> list[MetricDoc]:
        """Each metric's figures (``MetricResult.doc``), computed once."""
        if self._docs is None:
            self._docs = [m.doc(self.settings) for m in self.metrics]
        return self._docs

    def thresholds(self) -> dict[str, float]:
        """Each metric's in-sample threshold (metrics no grid value held are left out)."""
        return {m.metric: m.threshold for m in self.metrics if m.threshold is not None}

    def max_regression(self) -> float | None:
        return max(self.thresholds().values(), default=None)

    def gate(self) -> GateDoc:
        """The whole gate (any metric fails the pair) at the in-sample thresholds and at the
        rules file's own, in and out of sample."""
        st, lim = self.settings, self.thresholds()
        written = {m.metric: m.written for m in self.metrics}
        ins = {m.metric: m.in_sample for m in self.metrics}
        oos = {m.metric: m.out_of_sample for m in self.metrics}

        def chosen(metric: str, carrier: str) -> float | None:
            return lim.get(metric)

        def as_written(metric: str, carrier: str) -> float | None:
            return written[metric](carrier)

        return GateDoc(
            in_sample=gate_counts(ins, chosen, st.level, self.failed_runs),
            out_of_sample=gate_counts(oos, chosen, st.level, set()),
            as_written={
                "in_sample": gate_counts(ins, as_written, st.level, self.failed_runs),
                "out_of_sample": gate_counts(oos, as_written, st.level, set()),
            },
        )

    def document(self) -> CalibrationDoc:
        """``calibration.json``'s figures (the CLI adds the scenario, rules and environment)."""
        st = self.settings
        return CalibrationDoc(
            slowdown=st.slowdown,
            target_false_failure_rate=st.target,
            out_of_sample_target=st.oos_target,
            power_target=st.power,
            alpha=st.alpha,
            max_regression=self.max_regression(),
            thresholds=self.thresholds(),
            machines=self.machines,
            metrics=self.metric_docs(),
            absolute_rules=self.absolute,
            gate=self.gate(),
        )


class CalibrationDoc(BaseModel):
    """``calibration.json`` as ``calibrate`` writes it (``Calibration.document``)."""

    slowdown: float
    target_false_failure_rate: float
    out_of_sample_target: float
    power_target: float
    alpha: float | None
    max_regression: float | None
    thresholds: dict[str, float]
    machines: dict[str, Machine]
    metrics: list[MetricDoc]
    absolute_rules: dict[str, RuleCount]
    gate: GateDoc


def machine_info(runs: Sequence[Run]) -> dict[str, Machine]:
    """Per machine: how many runs, and what their reports say of where they ran."""
    out: dict[str, Machine] = {}
    for run in runs:
        env = run.report.header.environment
        row = out.setdefault(run.machine, Machine())
        row.runs += 1
        commit = env.git.commit if env.git else None
        for seen, value in ((row.commits, str(commit or "?")[:12]),
                            (row.created, str(env.created or "?")[:16]),
                            (row.platform, str(env.platform or "?")),
                            (row.setups, setup_text(run.report))):  # fmt: skip
            if value not in seen:
                seen.append(value)
    return out


def calibrate(
    runs: Sequence[Run], holdout: Sequence[Run], rules: GateRules, st: Settings
) -> Calibration:
    """``runs``: the calibration machine's runs; ``holdout``: other machines' runs."""
    base = rules.baseline or BaselineRules()
    st = replace(st, alpha=base.alpha)
    ins_pairs, oos_pairs = pairs_for(runs, holdout)
    results = []
    for metric in metrics_of(rules):
        ins, oos = score(metric, ins_pairs, st.slowdown), score(metric, oos_pairs, st.slowdown)
        chosen = smallest_threshold(ins, st.target, st.level)

        def written(carrier: str, metric: str = metric) -> float:
            return base.threshold(metric, carrier)

        results.append(MetricResult(metric, ins, oos, chosen, written))
    absolute, failed = absolute_rates(runs, rules)
    machines = machine_info([*runs, *holdout])
    return Calibration(st, results, absolute, machines, failed)


__all__ = ["CALIBRATION", "Calibration", "MetricResult", "Settings", "calibrate", "rates"]
