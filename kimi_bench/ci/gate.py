"""CI gating: typed rules (``ci.rules``) applied to the evidence of each report
(``ci.evidence``: every figure recomputed from the report's raw data; each kind's absolute
rules are in ``ci.kind_rules``), and relative rules against a baseline (``ci.baseline``).

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

from dataclasses import dataclass
from pathlib import Path

from kimi_bench.ci.baseline import (
    Allow,
    BaselineError,
    is_self,
    relative_rules,
    search_baseline,
)
from kimi_bench.ci.evidence import Evidence, EvidenceError
from kimi_bench.ci.evidence_rows import evidence
from kimi_bench.ci.history import HistoryLine, history_rules
from kimi_bench.ci.kind_rules import micro_rules, parity_rules, serve_rules
from kimi_bench.ci.metrics import GATED_KINDS, KIND_TABLE
from kimi_bench.ci.rules import GateRules, RulesError, load_rules
from kimi_bench.ci.verdicts import FAIL, INCONCLUSIVE, PASS, SKIP, RuleResult
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


def report_label(rep: Report) -> str:
    """Short identity of a report for tables and JUnit class names, in words:
    ``micro (2 ranks, shm)``, ``parity (kimi-k3, built-in corpus)``."""
    cfg = rep.header.config
    if cfg.imported:
        tools = (cfg.source.tools if cfg.source else None) or ["?"]
        return f"{rep.kind} (imported: {', '.join(map(str, tools))})"
    if rep.kind in ("micro", "serve-ab"):
        return f"{rep.kind} ({cfg.ranks} ranks, {cfg.transport})"
    if rep.kind == "parity":
        pre = cfg.preprocess
        parts = [str(pre.name) if pre is not None else cfg.preset or "?"]
        parts.append(f"images in {cfg.images}" if cfg.images else "built-in corpus")
        if cfg.policy:
            parts.append(f"per-{cfg.policy} decisions")
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
        out += serve_rules(ev, rules.serve_ab, rules.inconclusive)
    if rules.baseline is not None and any(
        m.startswith(table + ".") for m in rules.baseline.metrics
    ):
        required = required and baseline is not None
        found = search_baseline(rep, baseline, required=required, allow=allow.differences)
        rel = relative_rules(ev.derived, found.derived, rules.baseline, required=required,
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
    name = str(report.header.environment.device_name or "").lower()
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
    def empty(self) -> bool:
        """No rule of the rules file (or the history) was evaluated: nothing was checked."""
        return summarize(self.results).nothing_checked

    @property
    def exit_code(self) -> int:
        s = summarize(self.results)
        if s.failed or s.nothing_checked:
            return 1
        if s.no_regression is not None and not s.accepted:
            return EXIT_NO_REGRESSION_CHECK
        return 0

    def line(self) -> Line:
        return gate_line(self.results)

    def verdict(self) -> str:
        return self.line().text


def run_gate(
    reports: list[Report],
    rules: GateRules,
    baseline: Path | None,
    history: list[HistoryLine] | None = None,
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
