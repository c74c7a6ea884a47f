"""CI gating: typed rules (``ci.rules``) applied to the evidence of each report
(``ci.evidence``: every figure recomputed from the report's raw data), and relative rules
against a baseline (``ci.baseline``).

Absolute rules (per kind):
    [parity]    all_bit_exact = true
    [micro]     min_speedup = 8, max_floor_ratio = 20, min_bytes_ratio = 3, bit_exact = true
    [serve_ab]  max_failed = 0
    [serve_ab.<rate>]  max_median_ttft_delta = -0.5, max_p90_ttft_delta, min_throughput_delta
Relative rules (a baseline; see ``ci.baseline``):
    [baseline]  max_regression = 0.10, alpha = 0.05, metrics = ["micro.deferred.total_ms", ...]
    inconclusive = "warn" | "fail"   (a rule whose interval straddles its threshold)

No silent pass (issue 42): when the rules hold regression (``[baseline]``) rules for these
reports and every one was skipped because no comparable baseline was found, the verdict
says no regression check was made and why, and the gate exits with
``EXIT_NO_REGRESSION_CHECK`` unless the caller accepted it (``Allow.no_baseline``). A
``--history`` too short for a change point passes, saying how many more runs it needs.

Always applied, whatever the rules say: ``<kind>.complete`` fails a report whose raw data
shows a run that did not finish (a planned repeat or request missing, an error, a report
not marked final). A report whose summary disagrees with its raw data, or whose numbers are
negative or not finite, is refused (EvidenceError, exit 2): it is never gated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_bench.ci.baseline import (
    Allow,
    BaselineError,
    is_self,
    relative_rules,
    search_baseline,
)
from kimi_bench.ci.evidence import Evidence, EvidenceError
from kimi_bench.ci.evidence_rows import evidence
from kimi_bench.ci.history import history_rules
from kimi_bench.ci.metrics import GATED_KINDS, KIND_TABLE
from kimi_bench.ci.rules import GateRules, MicroRules, RulesError, ServeRules, load_rules
from kimi_bench.ci.serving_rules import ABSOLUTE, serving_rules
from kimi_bench.ci.verdicts import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    SKIP,
    RuleResult,
    decide,
    interval_text,
    with_policy,
)
from kimi_bench.infra.stats.compare import Comparison
from kimi_bench.infra.stats.format import fmt_speedup
from kimi_bench.report.files import report_file
from kimi_bench.report.gate_verdict import ACCEPTED, gate_line, summarize
from kimi_bench.report.model import Report, ReportError
from kimi_bench.report.verdicts import Line

__all__ = [
    "GATED_KINDS",
    "Allow",
    "BaselineError",
    "EvidenceError",
    "RuleResult",
    "RulesError",
    "evaluate",
    "load_rules",
]


def _rule(name: str, ok: bool, measured: Any, limit: Any, why: str) -> RuleResult:
    return RuleResult(name, measured, limit, PASS if ok else FAIL, why)


def parity_rules(ev: Evidence, rules: Any) -> list[RuleResult]:
    """``all_bit_exact``: every input identical in FP32 and BF16. An input that was rejected
    (unreadable, refused by a limit) was never compared: it counts against the rule unless
    ``max_rejected`` allows that many."""
    if rules is None or not rules.all_bit_exact:
        return []
    f = ev.figures
    bad, accepted, rejected = f["differing"], f["accepted"], f["rejected"]
    allowed = rules.max_rejected or 0
    why = (
        f"{accepted} accepted inputs identical in FP32 and BF16"
        if not bad
        else f"not bit-identical: {', '.join(bad)}"
    )
    if not accepted:
        why = "no accepted input: nothing was compared"
    ok = f["all_bit_exact"] and len(rejected) <= allowed
    if rejected:
        shown = ", ".join(rejected[:5]) + (", ..." if len(rejected) > 5 else "")
        why += (
            f"; {len(rejected)} of {accepted + len(rejected)} inputs rejected, never compared "
            f"({shown}); [parity] max_rejected allows {allowed}"
        )
    return [_rule("parity.all_bit_exact", ok, accepted - len(bad), accepted + len(rejected), why)]


def _min_speedup(ev: Evidence, lim: float, policy: str) -> RuleResult:
    m = ev.measurements.get("speedup")
    if m is None or not m.n:
        return _rule("micro.min_speedup", False, None, lim, "no paired speedup")
    iv = ev.figures.get("speedup_interval") or m.interval()  # the re-run interval
    verdict = decide(m.median, iv.low, iv.high, lim, at_least=True)
    spread = interval_text(iv.low, iv.high)
    why = f"deferred {fmt_speedup(m.median, 'eager')} (median){spread}, needs >= {lim}x"
    return with_policy(RuleResult("micro.min_speedup", m.median, lim, verdict, why), policy)


def _max_floor_ratio(ev: Evidence, lim: float, policy: str) -> RuleResult:
    v = ev.figures.get("floor_ratio")
    ok = v is not None and 1.0 <= v <= lim  # below the floor: a measurement problem
    return _rule("micro.max_floor_ratio", ok, v, lim, floor_reason(v, lim))


def _min_bytes_ratio(ev: Evidence, lim: float, policy: str) -> RuleResult:
    v = ev.figures.get("bytes_ratio")
    why = f"eager moves {v:.2f}x the deferred bytes vs >= {lim}x" if v else "no bytes"
    return _rule("micro.min_bytes_ratio", v is not None and v >= lim, v, lim, why)


def _bit_exact(ev: Evidence, lim: bool, policy: str) -> RuleResult:
    f = ev.figures
    exact = f.get("bit_exact") is True
    why = f"owner BF16 identical in all {f.get('repeats')} repeats" if exact else "outputs differ"
    return _rule("micro.bit_exact", exact, exact, True, why)


# The micro rules in the order they are reported: the MicroRules field each one reads and
# its check; a field left unset (None, or bit_exact = false) is not checked.
_MICRO_CHECKS: tuple[tuple[str, Callable[[Evidence, Any, str], RuleResult]], ...] = (
    ("min_speedup", _min_speedup),
    ("max_floor_ratio", _max_floor_ratio),
    ("min_bytes_ratio", _min_bytes_ratio),
    ("bit_exact", _bit_exact),
)


def micro_rules(ev: Evidence, rules: MicroRules | None, policy: str) -> list[RuleResult]:
    if rules is None:
        return []
    limits = [(getattr(rules, field), check) for field, check in _MICRO_CHECKS]
    return [check(ev, lim, policy) for lim, check in limits if lim is not None and lim is not False]


def floor_reason(v: float | None, lim: float) -> str:
    """How far the deferred median is above the floor; a median below the floor is a
    measurement problem (the floor is the least work any arm does), said so."""
    if not v:
        return "no floor measured"
    if v < 1:
        return (
            f"deferred measured BELOW the floor ({v:.2f}x): a measurement problem, not a "
            "result (see the report's floor notes)"
        )
    return f"deferred takes {v:.1f}x the floor, allowed <= {lim}x"


_SERVE_METRIC = {
    "max_median_ttft_delta": "median_ttft",
    "max_p90_ttft_delta": "p90_ttft",
    "min_throughput_delta": "throughput",
    "min_goodput_delta": "goodput",
}


def _delta_rule(name: str, c: Comparison | None, key: str, lim: float, policy: str) -> RuleResult:
    metric = _SERVE_METRIC[key]
    if c is None or c.delta_pct is None:
        return RuleResult(name, None, lim, FAIL, f"no {metric} delta (no served requests)")
    v = c.delta_pct / 100.0
    low = None if c.interval.low is None else c.interval.low / 100.0
    high = None if c.interval.high is None else c.interval.high / 100.0
    at_least = key.startswith("min")
    verdict = decide(v, low, high, lim, at_least=at_least)
    iv = interval_text(low, high, "{:+.1%}")
    why = f"{metric} delta {v:+.1%}{iv} vs {'>=' if at_least else '<='} {lim:+.0%}"
    return with_policy(RuleResult(name, v, lim, verdict, why), policy)


def serve_rules(
    ev: Evidence, rules: ServeRules | None, policy: str, report: Report | None = None
) -> list[RuleResult]:
    if rules is None:
        return []
    out = []
    if rules.max_failed is not None:
        out.append(_max_failed(ev, rules.max_failed))
    ab = ev.figures.get("ab") or {}
    planned = ev.figures.get("rates") or []
    for rate, body in rules.rates.items():
        if planned and rate not in planned:  # a rule for a rate this run did not plan
            for key, lim in body.model_dump(exclude_none=True).items():
                why = f"rate {rate} was not run (this run's rates: {', '.join(planned)})"
                out.append(RuleResult(f"serve_ab.{rate}.{key}", None, lim, SKIP, why))
            continue
        per_arm = ab.get(rate)
        change = ev.figures.get("change_arm")
        arm = change if per_arm and change in per_arm else next(iter(per_arm or {}), None)
        arms = ev.figures.get("arms") or []
        limits = body.model_dump(exclude_none=True)
        if report is not None:
            out += serving_rules(report, rate, list(arms), limits)
        for key, lim in limits.items():
            if key in ABSOLUTE:
                continue
            name = f"serve_ab.{rate}.{key}"
            if not per_arm or arm is None:
                why = (
                    f"rate {rate} has one arm ({', '.join(arms)}): no A/B delta to check "
                    "(import or run a second arm)"
                    if len(arms) == 1
                    else f"rate {rate} not in the report"
                )
                out.append(RuleResult(name, None, lim, FAIL, why))
                continue
            out.append(_delta_rule(name, per_arm[arm].get(_SERVE_METRIC[key]), key, lim, policy))
    return out


def _max_failed(ev: Evidence, lim: int) -> RuleResult:
    """Failed requests counted from the request rows. A summary-only report (a peer's file
    without per-request data) has no rows to count them from, and a file that does not say
    how many failed cannot be counted at all: both fail by name rather than pass."""
    v = ev.figures["failed"]
    if ev.figures.get("summary_only"):
        why = (
            "summary only: no request rows to count failures from (the tool's own count "
            f"says {v}); import a file with per-request data"
        )
        return RuleResult("serve_ab.max_failed", None, lim, FAIL, why)
    if ev.figures.get("failed_unknown"):
        why = "the file does not count failed requests: they cannot be shown to be <= " + str(lim)
        return RuleResult("serve_ab.max_failed", None, lim, FAIL, why)
    return _rule("serve_ab.max_failed", v <= lim, v, lim, f"{v} failed requests")


def report_label(rep: Report) -> str:
    """Short identity of a report for tables and JUnit class names, in words:
    ``micro (2 ranks, shm)``, ``parity (kimi-k3, built-in corpus)``."""
    cfg = rep.config if isinstance(rep.config, dict) else {}
    if cfg.get("imported"):
        tools = (cfg.get("source") or {}).get("tools") or ["?"]
        return f"{rep.kind} (imported: {', '.join(map(str, tools))})"
    if rep.kind in ("micro", "serve-ab"):
        return f"{rep.kind} ({cfg.get('ranks')} ranks, {cfg.get('transport')})"
    if rep.kind == "parity":
        pre = cfg.get("preprocess")
        parts = [str(pre.get("name") if isinstance(pre, dict) else cfg.get("preset") or "?")]
        parts.append(f"images in {cfg['images']}" if cfg.get("images") else "built-in corpus")
        if cfg.get("policy"):
            parts.append(f"per-{cfg['policy']} decisions")
        return f"parity ({', '.join(parts)})"
    return f"{rep.kind} ({rep.source or 'in memory'})"


def completeness_rule(rep: Report, ev: Evidence) -> RuleResult:
    name = f"{KIND_TABLE.get(rep.kind, rep.kind)}.complete"
    if ev.complete:
        return RuleResult(name, True, True, PASS, "every planned part is in the raw data")
    why = "; ".join(ev.incomplete_why[:4]) + ("; ..." if len(ev.incomplete_why) > 4 else "")
    return RuleResult(name, False, True, FAIL, f"the run did not complete: {why}")


def rules_for(
    rep: Report,
    rules: GateRules,
    baseline: Path | None,
    required: bool,
    allow: Allow = Allow(),
) -> list[RuleResult]:
    """Every rule on one report. ReportError (EvidenceError, BaselineError) when the
    report or the baseline asked for cannot be used."""
    if rep.kind not in GATED_KINDS:
        raise ReportError(
            f"{rep.source or 'report'}: kind {rep.kind!r} is not gated; expected one of "
            f"{', '.join(GATED_KINDS)}"
        )
    ev = evidence(rep)
    table = KIND_TABLE[rep.kind]
    out = [completeness_rule(rep, ev)]
    if rep.kind == "parity":
        out += parity_rules(ev, rules.parity)
    elif rep.kind == "micro":
        out += micro_rules(ev, rules.micro, rules.inconclusive)
    else:
        out += serve_rules(ev, rules.serve_ab, rules.inconclusive, rep)
    if rules.baseline is not None and any(
        m.startswith(table + ".") for m in rules.baseline.metrics
    ):
        required = required and baseline is not None
        found = search_baseline(rep, baseline, required=required, allow=allow.differences)
        rel = relative_rules(rep, found.report, rules.baseline, required=required,
                             none_why=found.why, notes=found.notes)  # fmt: skip
        for r in rel:
            if allow.no_baseline and r.verdict == SKIP:
                r.reason += f" ({ACCEPTED})"
        out += rel
    return out


def evaluate(
    reports: list[Report],
    rules: GateRules,
    baseline: Path | None,
    *,
    baseline_required: bool = True,
    allow: Allow = Allow(),
) -> list[RuleResult]:
    """Every rule on every report. ``baseline_required``: ``baseline`` was asked for, so a
    missing, unreadable or non-matching one raises BaselineError instead of skipping, and a
    skipped baseline rule fails."""
    results: list[RuleResult] = []
    for rep in reports:
        for r in rules_for(rep, rules, baseline, baseline_required, allow):
            r.report = report_label(rep)
            results.append(r)
    return results


def default_baseline_dir(report: Report, root: Path = Path("reports/baselines")) -> Path:
    name = str(report.environment.get("device_name", "")).lower()
    return root / ("h200" if "h200" in name else "cpu")


# The gate's exit codes besides 0 (pass) and 1 (a rule failed, or nothing was checked).
EXIT_NO_REGRESSION_CHECK = 5  # every regression rule skipped: no baseline (not accepted)


@dataclass
class GateOutcome:
    """All rule results of one gate call and the verdict they add up to
    (``report.gate_verdict``: the same words in ``gate``, ``run``, gate.md and
    index.html)."""

    results: list[RuleResult]

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.results if r.verdict == FAIL]

    @property
    def inconclusive(self) -> list[RuleResult]:
        return [r for r in self.results if r.verdict == INCONCLUSIVE]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.results]

    @property
    def empty(self) -> bool:
        """No rule of the rules file (or the history) was evaluated: nothing was checked."""
        return summarize(self.rows).nothing_checked

    @property
    def exit_code(self) -> int:
        s = summarize(self.rows)
        if s.failed or s.nothing_checked:
            return 1
        if s.no_regression is not None and not s.accepted:
            return EXIT_NO_REGRESSION_CHECK
        return 0

    def line(self) -> Line:
        return gate_line(self.rows)

    def verdict(self) -> str:
        return self.line().text


def run_gate(
    reports: list[Report],
    rules: GateRules,
    baseline: Path | None,
    history: list[dict[str, Any]] | None = None,
    allow: Allow = Allow(),
) -> GateOutcome:
    """The gate: ``baseline`` given means required (checked even when no rule uses it);
    without it each report's default folder (``default_baseline_dir``) is searched."""
    if baseline is not None and not baseline.exists():
        raise BaselineError(f"--baseline {baseline} does not exist")
    given = report_file(baseline) if baseline is not None else None
    for rep in reports:
        if given is not None and is_self(rep, given):
            raise BaselineError(
                f"--baseline {baseline} is the gated report itself; give the reference run"
            )
    results: list[RuleResult] = []
    for rep in reports:
        base = baseline or default_baseline_dir(rep)
        results += evaluate([rep], rules, base, baseline_required=baseline is not None,
                            allow=allow)  # fmt: skip
    if history is not None:
        for r in history_rules(history):
            r.report = "history"
            results.append(r)
    return GateOutcome(results)
