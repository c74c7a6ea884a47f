"""Rules that know their own error rates, in sample and out of sample.

Input: runs of one or more setups on ONE machine (the calibration set: A/A, nothing
changed between them) and, optionally, runs of the same setups on OTHER machines
(``--holdout``; see ``calibrate_pairs``). For every relative (baseline) metric:

- **in sample**: over the calibration machine's A/A pairs, the smallest threshold of a
  grid whose A/A failures stay within ``target`` (at most ``floor(target * N)`` pairs) is
  chosen, and the detection of an injected slowdown is measured there: the candidate's raw
  samples of the deferred arm scaled by ``1 + slowdown`` (times; a speedup is divided by
  it), the documented stand-in for a commit that makes the deferred path slower;
- **out of sample**: that threshold applied, unchanged, to every cross-machine pair (a
  baseline from one machine, a candidate from another): the A/A false-failure rate and the
  detection of the same slowdown, per metric and per carrier, and whether both hold the
  out-of-sample targets (``oos_target``, ``power``). Where they do not, the smallest
  threshold the cross-machine A/A pairs allow and the smallest slowdown it then catches in
  ``power`` of them are stated (chosen on those pairs: not an independent estimate).

The absolute rules are applied to every run too (false failures and inconclusive).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from kimi_bench.ci.calibrate_pairs import Pair, Run, cross_machine_pairs, in_sample_pairs
from kimi_bench.ci.evidence import Derived
from kimi_bench.ci.gate import evaluate
from kimi_bench.ci.metrics import (
    KIND_TABLE,
    eager_time_metric,
    higher_is_better,
    metric_samples,
    own_time_metric,
)
from kimi_bench.ci.rules import BaselineRules, GateRules
from kimi_bench.ci.verdicts import FAIL, INCONCLUSIVE
from kimi_bench.infra.stats import median
from kimi_bench.infra.stats.rank_test import mann_whitney
from kimi_bench.report.model import Report
from kimi_bench.report.roles import DEFAULT_ROLES, change_arm

GRID = (0.02, 0.03, 0.05, 0.075, 0.10, 0.125, 0.15, 0.175, 0.20, 0.25, 0.30, 0.40, 0.50)
EFFECTS = tuple(round(0.05 * k, 2) for k in range(1, 21))  # slowdowns 5% .. 100%


@dataclass(frozen=True)
class PairOutcome:
    change: float  # relative median change, candidate vs reference (signed)
    worse: float  # the change in the "worse" direction of the metric
    p_value: float  # one-sided Mann-Whitney, candidate worse than reference
    # a metric that moves with the eager arm too (``metrics.own_time_metric``): the one-sided
    # p that the eager arm's own total got faster, and that the measured arm's own total got
    # slower (1.0 when its median moved the other way); the gate does not fail such a metric
    # when the eager arm got faster and the arm did not get slower (``ci.baseline``)
    eager_faster_p: float = 1.0
    own_slower_p: float = 1.0

    def fails(self, threshold: float, alpha: float) -> bool:
        eager_moved = self.eager_faster_p < alpha and not self.own_slower_p < alpha
        return self.worse > threshold and self.p_value < alpha and not eager_moved


def effect_factor(metric: str, slowdown: float) -> float:
    """How a deferred arm ``slowdown`` slower scales a metric's raw samples: every deferred
    time (and a ratio with a deferred time on top) by ``1 + slowdown``, the speedup (eager
    over deferred) by its inverse, anything else not at all. Exactly what rebuilding the
    report with every deferred stage sample scaled does (``scripts/slow_report.py``: the
    control rounds and the eager arm stay as measured)."""
    k = 1.0 + slowdown
    parts = metric.split(".")
    change = DEFAULT_ROLES["change"]  # the arm a metric's name calls the change
    if metric == "micro.speedup":
        return 1.0 / k
    if parts[0] == "micro" and parts[1] == change:
        return k
    if parts[0] == "serve_ab" and len(parts) == 4 and parts[2] == change:
        return k
    return 1.0


def inject(report: Report, slowdown: float) -> Report:
    """A copy of ``report`` whose deferred arm is ``slowdown`` slower in its raw data (micro:
    every deferred stage and total of the measured repeats, the control rounds as measured;
    serve-ab: deferred TTFTs). ``effect_factor`` gives what it does to each metric."""
    out = copy.deepcopy(report)
    k = 1.0 + slowdown
    change = change_arm(report.config, [str(a) for a in report.header.config.arms])
    if report.kind == "micro":
        for rec in out.data["repeats"].get(change, []):
            rec["total_ms"] *= k
            rec["stage_ms"] = {s: v * k for s, v in rec["stage_ms"].items()}
    elif report.kind == "serve-ab":
        for row in out.data["requests"]:
            if row.get("arm") == change and row.get("ttft_ms") is not None:
                row["ttft_ms"] *= k
    return out


Samples = tuple[list[float], list[float]]  # (candidate, reference)


def _p_greater(xs: list[float], bs: list[float]) -> float:
    """One-sided p that ``xs`` tends larger than ``bs`` (1.0 when its median is not)."""
    if not xs or not bs or not median(xs) > median(bs):
        return 1.0
    return mann_whitney(xs, bs, "greater").p_value


def outcome_of(
    metric: str,
    xs: list[float],
    bs: list[float],
    own: tuple[Samples, Samples] | None = None,
) -> PairOutcome:
    """The baseline rule's numbers for candidate samples ``xs`` vs reference ``bs``; ``own``:
    the eager arm's and the measured arm's own totals when the metric moves with both."""
    m_new, m_base = median(xs), median(bs)
    change = (m_new - m_base) / m_base if m_base else math.nan
    up = higher_is_better(metric)
    test = mann_whitney(bs, xs, "greater") if up else mann_whitney(xs, bs, "greater")
    worse = -change if up else change
    if own is None:
        return PairOutcome(change, worse, test.p_value)
    (ex, eb), (ox, ob) = own
    return PairOutcome(change, worse, test.p_value, _p_greater(eb, ex), _p_greater(ox, ob))


def own_samples(
    metric: str, candidate: Derived, reference: Derived
) -> tuple[Samples, Samples] | None:
    """The eager arm's and the measured arm's own totals of a pair, for a metric that moves
    with both (``metrics.own_time_metric``), else None."""
    own, eager = own_time_metric(candidate.report, metric), eager_time_metric(candidate.report)
    if own is None or eager is None:
        return None
    try:
        return (
            (metric_samples(candidate, eager), metric_samples(reference, eager)),
            (metric_samples(candidate, own), metric_samples(reference, own)),
        )
    except KeyError:
        return None


@dataclass
class Scored:
    """One metric on one set of pairs: each pair's raw samples (candidate, reference), its
    A/A outcome and its outcome with the injected slowdown, its carrier and its name."""

    metric: str
    aa: list[PairOutcome] = field(default_factory=list)
    injected: list[PairOutcome] = field(default_factory=list)
    carriers: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    samples: list[Samples] = field(default_factory=list)
    own: list[tuple[Samples, Samples] | None] = field(default_factory=list)  # own_samples

    def subset(self, carrier: str) -> Scored:
        keep = [i for i, c in enumerate(self.carriers) if c == carrier]
        fields = ("aa", "injected", "carriers", "names", "pairs", "samples", "own")
        return Scored(self.metric, *([getattr(self, f)[i] for i in keep] for f in fields))

    def false_failures(self, threshold: float, alpha: float) -> int:
        return sum(o.fails(threshold, alpha) for o in self.aa)

    def with_effect(self, slowdown: float) -> list[PairOutcome]:
        """Each pair's outcome with the candidate's deferred arm ``slowdown`` slower."""
        k = effect_factor(self.metric, slowdown)
        out = []
        for (xs, bs), own, pair in zip(self.samples, self.own, self.pairs, strict=True):
            name = own_time_metric(pair.candidate.report, self.metric)
            if own is not None and name is not None:  # slowed as the injection slows it
                ko = effect_factor(name, slowdown)
                own = (own[0], ([x * ko for x in own[1][0]], own[1][1]))
            out.append(outcome_of(self.metric, [x * k for x in xs], bs, own))
        return out


def score(metric: str, pairs: Sequence[Pair], slowdown: float) -> Scored:
    kind = "serve-ab" if metric.startswith("serve_ab.") else metric.split(".")[0]
    out = Scored(metric)
    for p in pairs:
        ref, cand = p.reference.derived, p.candidate.derived
        if ref.report.kind != kind:
            continue
        try:
            xs, bs = metric_samples(cand, metric), metric_samples(ref, metric)
        except KeyError:
            continue
        if not xs or not bs:
            continue
        own = own_samples(metric, cand, ref)
        out.samples.append((xs, bs))
        out.own.append(own)
        out.aa.append(outcome_of(metric, xs, bs, own))
        out.carriers.append(p.carrier)
        out.names.append(f"{p.reference.label} -> {p.candidate.label}")
        out.pairs.append(p)
    out.injected = out.with_effect(slowdown)
    return out


def smallest_threshold(s: Scored, target: float, alpha: float) -> float | None:
    """The smallest grid value whose A/A failures stay within ``target`` of the pairs."""
    if not s.aa:
        return None
    allowed = math.floor(target * len(s.aa) + 1e-9)
    return next((t for t in GRID if s.false_failures(t, alpha) <= allowed), None)


def smallest_effect(s: Scored, threshold: float, alpha: float, power: float) -> float | None:
    """The smallest injected slowdown (5% steps) that ``threshold`` catches in at least
    ``power`` of the pairs (None: not even a 100% slower arm). Catching is monotone in the
    slowdown, so the steps are bisected."""
    if not s.samples:
        return None
    need = math.ceil(power * len(s.samples) - 1e-9)

    def caught(effect: float) -> bool:
        return sum(o.fails(threshold, alpha) for o in s.with_effect(effect)) >= need

    lo, hi = 0, len(EFFECTS) - 1
    if not caught(EFFECTS[hi]):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if caught(EFFECTS[mid]) else (mid + 1, hi)
    return EFFECTS[lo]


@dataclass
class RuleCount:
    """How often one absolute rule failed or was inconclusive, over how many runs."""

    fail: int = 0
    inconclusive: int = 0
    runs: int = 0


def absolute_rates(runs: Sequence[Run], rules: GateRules) -> tuple[dict[str, RuleCount], set[str]]:
    """How often each absolute rule fails or is inconclusive on unchanged runs, and which
    runs (label) an absolute rule failed."""
    plain = rules.model_copy(update={"baseline": None})
    out: dict[str, RuleCount] = {}
    failed: set[str] = set()
    for run in runs:
        for r in evaluate([run.report], plain, None, baseline_required=False):
            row = out.setdefault(r.rule, RuleCount())
            row.runs += 1
            row.fail += r.verdict == FAIL
            row.inconclusive += INCONCLUSIVE in r.reason
            if r.verdict == FAIL:
                failed.add(run.label)
    return out, failed


def metrics_of(rules: GateRules) -> list[str]:
    base = rules.baseline or BaselineRules()
    return [m for m in base.metrics if m.split(".")[0] in KIND_TABLE.values()]


def pairs_for(runs: Sequence[Run], holdout: Sequence[Run]) -> tuple[list[Pair], list[Pair]]:
    """(in-sample pairs, out-of-sample pairs): A/A pairs on the calibration machine; pairs of
    two different machines (the calibration runs and every holdout machine's)."""
    return in_sample_pairs(runs), cross_machine_pairs([*runs, *holdout])


class GateCounts(BaseModel):
    """The whole gate over a set of pairs: A/A pairs failed, injected pairs caught."""

    pairs: int
    aa_failures: int
    injected_detected: int


def gate_counts(
    per_metric: dict[str, Scored],
    limit: Callable[[str, str], float | None],
    alpha: float,
    failed: set[str],
) -> GateCounts:
    """The whole gate over the pairs, each metric at ``limit(metric, carrier)`` (None: not
    gated): an A/A pair fails when any metric fails it (or an absolute rule failed its
    candidate run); an injected pair is caught when any metric catches it."""
    aa: dict[str, bool] = {}
    inj: dict[str, bool] = {}
    for metric, s in per_metric.items():
        for name, a, i, p in zip(s.names, s.aa, s.injected, s.pairs, strict=True):
            t = limit(metric, p.carrier)
            if t is None:
                continue
            bad = a.fails(t, alpha) or p.candidate.label in failed
            aa[name] = aa.get(name, False) or bad
            inj[name] = inj.get(name, False) or i.fails(t, alpha)
    return GateCounts(
        pairs=len(aa), aa_failures=sum(aa.values()), injected_detected=sum(inj.values())
    )
