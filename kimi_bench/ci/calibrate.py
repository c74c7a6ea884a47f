"""Rules that know their own error rates: calibrate the gate on this machine.

Input: 2N runs of one scenario at one commit (A/A: nothing changed between them), paired
as (run 2i, run 2i+1). For every relative (baseline) metric the false-failure rate is
measured over the A/A pairs, and the detection power over the same pairs with an injected
slowdown: the candidate's raw samples of the deferred arm are scaled by ``1 + slowdown``
(times; a speedup is divided by it), the documented stand-in for a commit that makes the
deferred path slower. The calibrated ``max_regression`` is the smallest value of a grid
whose A/A failures stay within ``target`` (at most ``floor(target * N)`` pairs; with
N = 20 and the 1% default: none), and the report states the power it then has. The
absolute rules are applied to every run too, and their false-failure rate (fail, and
inconclusive) is reported per rule.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kimi_bench.ci.gate import evaluate
from kimi_bench.ci.metrics import higher_is_better, metric_samples
from kimi_bench.ci.rules import BaselineRules, GateRules
from kimi_bench.ci.verdicts import FAIL, INCONCLUSIVE
from kimi_bench.infra.stats import median
from kimi_bench.infra.stats.rank_test import mann_whitney
from kimi_bench.report.model import Report

GRID = (0.02, 0.03, 0.05, 0.075, 0.10, 0.125, 0.15, 0.175, 0.20, 0.25, 0.30, 0.40, 0.50)
POWER_TARGET = 0.95


@dataclass
class PairOutcome:
    change: float  # relative median change, candidate vs reference (signed)
    worse: float  # the change in the "worse" direction of the metric
    p_value: float  # one-sided Mann-Whitney, candidate worse than reference


@dataclass
class MetricCalibration:
    metric: str
    aa: list[PairOutcome] = field(default_factory=list)
    injected: list[PairOutcome] = field(default_factory=list)
    max_regression: float | None = None
    false_failures: int = 0
    detected: int = 0

    @property
    def power(self) -> float:
        return self.detected / len(self.injected) if self.injected else math.nan

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "pairs": len(self.aa),
            "max_regression": self.max_regression,
            "false_failures": self.false_failures,
            "false_failure_rate": self.false_failures / len(self.aa) if self.aa else None,
            "detected": self.detected,
            "power": None if math.isnan(self.power) else self.power,
            "aa": [vars(o) for o in self.aa],
            "injected": [vars(o) for o in self.injected],
        }


def inject(report: Report, metric: str, slowdown: float) -> Report:
    """A copy of ``report`` whose deferred arm is ``slowdown`` slower in the raw data the
    metric reads (micro: every deferred stage and total; serve-ab: deferred TTFTs)."""
    out = copy.deepcopy(report)
    k = 1.0 + slowdown
    if report.kind == "micro":
        for rec in out.data["repeats"].get("deferred", []):
            rec["total_ms"] *= k
            rec["stage_ms"] = {s: v * k for s, v in rec["stage_ms"].items()}
    elif report.kind == "serve-ab":
        for row in out.data["requests"]:
            if row.get("arm") == "deferred" and row.get("ttft_ms") is not None:
                row["ttft_ms"] *= k
    del metric
    return out


def outcome(metric: str, candidate: Report, reference: Report) -> PairOutcome | None:
    try:
        xs, bs = metric_samples(candidate, metric), metric_samples(reference, metric)
    except KeyError:
        return None
    if not xs or not bs:
        return None
    m_new, m_base = median(xs), median(bs)
    change = (m_new - m_base) / m_base if m_base else math.nan
    up = higher_is_better(metric)
    test = mann_whitney(bs, xs, "greater") if up else mann_whitney(xs, bs, "greater")
    return PairOutcome(change, -change if up else change, test.p_value)


def _fails(o: PairOutcome, threshold: float, alpha: float) -> bool:
    return o.worse > threshold and o.p_value < alpha


def calibrate_metric(
    metric: str, pairs: Sequence[tuple[Report, Report]], slowdown: float, target: float,
    alpha: float,
) -> MetricCalibration:  # fmt: skip
    cal = MetricCalibration(metric)
    for ref, cand in pairs:
        aa, inj = outcome(metric, cand, ref), outcome(metric, inject(cand, metric, slowdown), ref)
        if aa is not None and inj is not None:
            cal.aa.append(aa)
            cal.injected.append(inj)
    if not cal.aa:
        return cal
    allowed = math.floor(target * len(cal.aa) + 1e-9)
    for threshold in GRID:
        false = sum(_fails(o, threshold, alpha) for o in cal.aa)
        if false <= allowed:
            cal.max_regression, cal.false_failures = threshold, false
            cal.detected = sum(_fails(o, threshold, alpha) for o in cal.injected)
            break
    return cal


@dataclass
class Calibration:
    pairs: int
    slowdown: float
    target: float
    alpha: float
    metrics: list[MetricCalibration]
    absolute: dict[str, dict[str, int]]  # rule -> {"fail": n, "inconclusive": n, "runs": n}
    failed_runs: set[int] = field(default_factory=set)  # runs an absolute rule failed

    def gate_level(self) -> tuple[int, int]:
        """(A/A pairs the whole gate fails, injected pairs it catches) with each metric at
        its calibrated threshold: a pair fails when any baseline metric fails, or (A/A) an
        absolute rule fails the candidate run."""
        limits = self.thresholds()
        if not limits:
            return 0, 0
        false = detected = 0
        for i in range(self.pairs):
            abs_fail = 2 * i + 1 in self.failed_runs
            false += abs_fail or any(
                _fails(m.aa[i], limits[m.metric], self.alpha)
                for m in self.metrics
                if m.metric in limits and i < len(m.aa)
            )
            detected += any(
                _fails(m.injected[i], limits[m.metric], self.alpha)
                for m in self.metrics
                if m.metric in limits and i < len(m.injected)
            )
        return false, detected

    def thresholds(self) -> dict[str, float]:
        """Each metric's calibrated threshold (metrics no grid value held are left out)."""
        return {m.metric: m.max_regression for m in self.metrics if m.max_regression is not None}

    def max_regression(self) -> float | None:
        """The default threshold of the written rules: the largest any metric needs."""
        return max(self.thresholds().values(), default=None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "slowdown": self.slowdown,
            "target_false_failure_rate": self.target,
            "alpha": self.alpha,
            "max_regression": self.max_regression(),
            "thresholds": self.thresholds(),
            "metrics": [m.as_dict() for m in self.metrics],
            "absolute_rules": self.absolute,
            "gate": dict(zip(("aa_failures", "injected_detected"), self.gate_level(), strict=True))
            | {"pairs": self.pairs},
        }


def absolute_rates(
    runs: Sequence[Sequence[Report]], rules: GateRules
) -> tuple[dict[str, dict[str, int]], set[int]]:
    """How often each absolute rule fails or is inconclusive on unchanged runs, and which
    runs (index) an absolute rule failed."""
    plain = rules.model_copy(update={"baseline": None})
    out: dict[str, dict[str, int]] = {}
    failed: set[int] = set()
    for i, reps in enumerate(runs):
        for r in evaluate(list(reps), plain, None, baseline_required=False):
            row = out.setdefault(r.rule, {"fail": 0, "inconclusive": 0, "runs": 0})
            row["runs"] += 1
            row["fail"] += r.verdict == FAIL
            row["inconclusive"] += INCONCLUSIVE in r.reason
            if r.verdict == FAIL:
                failed.add(i)
    return out, failed


def calibrate(
    runs: Sequence[Sequence[Report]],
    rules: GateRules,
    *,
    slowdown: float = 0.20,
    target: float = 0.01,
) -> Calibration:
    """``runs``: the reports of each run, in the order the runs ran (A, B, A, B, ...)."""
    base = rules.baseline or BaselineRules()
    by_kind: dict[str, list[Report]] = {}
    for reps in runs:
        for rep in reps:
            by_kind.setdefault(rep.kind, []).append(rep)
    metrics = []
    n_pairs = 0
    for metric in base.metrics:
        kind = "serve-ab" if metric.startswith("serve_ab.") else metric.split(".")[0]
        reps = by_kind.get(kind, [])
        pairs = [(reps[i], reps[i + 1]) for i in range(0, len(reps) - 1, 2)]
        n_pairs = max(n_pairs, len(pairs))
        metrics.append(calibrate_metric(metric, pairs, slowdown, target, base.alpha))
    absolute, failed = absolute_rates(runs, rules)
    return Calibration(n_pairs, slowdown, target, base.alpha, metrics, absolute, failed)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def rules_toml(rules: GateRules, cal: Calibration, header: str) -> str:
    """The rules with the calibrated ``[baseline] max_regression``, as a TOML file."""
    lines = [f"# {line}" for line in header.splitlines()] + [""]
    lines.append(f'inconclusive = "{rules.inconclusive}"')
    for table in ("parity", "micro", "serve_ab"):
        part = getattr(rules, table)
        if part is None:
            continue
        body = part.model_dump(exclude_none=True, exclude={"rates"})
        lines += ["", f"[{table}]", *(f"{k} = {_toml_value(v)}" for k, v in body.items())]
        for rate, rr in (getattr(part, "rates", None) or {}).items():
            sub = rr.model_dump(exclude_none=True)
            lines += ["", f"[{table}.{rate}]", *(f"{k} = {_toml_value(v)}" for k, v in sub.items())]
    base = rules.baseline or BaselineRules()
    threshold = cal.max_regression() or base.max_regression
    lines += [
        "",
        "[baseline]",
        f"max_regression = {threshold!r}   # calibrated: {cal.pairs} A/A pairs",
        f"alpha = {base.alpha!r}",
        f"metrics = {_toml_value(list(base.metrics))}",
    ]
    if limits := cal.thresholds():
        lines += ["", "[baseline.thresholds]   # each metric's calibrated max_regression"]
        lines += [f'"{m}" = {v!r}' for m, v in limits.items()]
    return "\n".join(lines) + "\n"


def calibration_markdown(cal: Calibration) -> str:
    rows = [
        "| metric | A/A pairs | max_regression | A/A failures | injected slowdown detected |",
        "|---|---|---|---|---|",
    ]
    for m in cal.metrics:
        power = (
            "n/a" if math.isnan(m.power) else f"{m.detected} of {len(m.injected)} ({m.power:.0%})"
        )
        rows.append(
            f"| {m.metric} | {len(m.aa)} | {m.max_regression} | {m.false_failures} | {power} |"
        )
    abs_rows = ["| rule | runs | failed | inconclusive |", "|---|---|---|---|"]
    for rule, c in cal.absolute.items():
        abs_rows.append(f"| {rule} | {c['runs']} | {c['fail']} | {c['inconclusive']} |")
    weak = [m.metric for m in cal.metrics if m.injected and m.power < POWER_TARGET]
    aa_fail, caught = cal.gate_level()
    note = (
        f"Power below {POWER_TARGET:.0%} for: {', '.join(weak)} (more repeats or requests per "
        "run would narrow the noise)."
        if weak
        else f"Every metric detects the injected slowdown in at least {POWER_TARGET:.0%} of pairs."
    )
    return "\n".join(
        [
            "# kimi-bench gate calibration",
            "",
            f"{cal.pairs} A/A pairs; injected slowdown of the deferred arm: "
            f"{cal.slowdown:+.0%}; target false-failure rate {cal.target:.0%}; alpha {cal.alpha}.",
            "",
            f"**The whole gate** (each metric at its max_regression below): failed {aa_fail} "
            f"of {cal.pairs} A/A pairs; caught the injected slowdown in {caught} of "
            f"{cal.pairs} pairs.",
            "",
            "## Relative (baseline) rules",
            "",
            *rows,
            "",
            note,
            "",
            "## Absolute rules on the unchanged runs",
            "",
            *abs_rows,
            "",
        ]
    )
