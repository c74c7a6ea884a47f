"""The gate's verdict line from rule rows (``report.gate_verdict``): the same words for
``gate``, ``run``, gate.md and index.html (issue 42: no plain PASS without a regression
check; a short history waits; a busy baseline is named)."""

from kimi_bench.ci.gate import EXIT_NO_REGRESSION_CHECK, GateOutcome
from kimi_bench.ci.verdicts import RuleResult
from kimi_bench.report.gate_verdict import ACCEPTED, BUSY_BASELINE, gate_line


def row(rule: str, verdict: str, reason: str = "") -> RuleResult:
    return RuleResult(rule, None, None, verdict, reason)


COMPLETE = row("micro.complete", "pass")
SPEEDUP = row("micro.min_speedup", "pass")
NO_BASE = "no baseline: reports/baselines/cpu does not exist"


def outcome(*rows: RuleResult) -> tuple[int, str, str]:
    o = GateOutcome(list(rows))
    line = gate_line(o.results)
    return o.exit_code, line.text, line.tone


def test_every_baseline_rule_skipped_is_no_regression_check():
    code, text, tone = outcome(COMPLETE, SPEEDUP, row("baseline.micro.speedup", "skip", NO_BASE))
    assert code == EXIT_NO_REGRESSION_CHECK and tone == "bad"
    assert text.startswith("gate NO REGRESSION CHECK") and NO_BASE in text
    accepted = row("baseline.micro.speedup", "skip", f"{NO_BASE} ({ACCEPTED})")
    code, text, tone = outcome(COMPLETE, SPEEDUP, accepted)
    assert code == 0 and tone == "unresolved"
    assert text.startswith(f"gate PASS with no regression check: {NO_BASE} ({ACCEPTED})")


def test_one_baseline_rule_evaluated_is_a_regression_check():
    rows = (COMPLETE, row("baseline.micro.speedup", "pass"),
            row("baseline.micro.deferred.total_ms", "skip", NO_BASE))  # fmt: skip
    code, text, tone = outcome(*rows)
    assert code == 0 and text.startswith("gate PASS: 2 passed, 1 skipped") and tone == "good"


def test_a_failure_wins_and_nothing_checked_fails():
    code, text, _ = outcome(COMPLETE, row("micro.min_speedup", "fail"),
                            row("baseline.micro.speedup", "skip", NO_BASE))  # fmt: skip
    assert code == 1 and text.startswith("gate FAIL: 1 of 3 rules")
    code, text, _ = outcome(COMPLETE)
    assert code == 1 and "no rule was evaluated" in text


def test_a_short_history_waits_and_passes():
    rows = (
        row("history.micro.deferred_median_ms", "skip", "2 runs: 4 more needed before ..."),
        row("history.serve-ab.failed_requests", "skip", "0 runs: 6 more needed before ..."),
    )
    code, text, tone = outcome(*rows)
    assert code == 0 and tone == "unresolved"
    assert "the history is too short for a change point: 4 more run(s) needed" in text
    code, text, _ = outcome(*rows, COMPLETE, row("baseline.micro.speedup", "skip", NO_BASE))
    assert code == 0 and f"no baseline either: {NO_BASE}" in text


def test_an_evaluated_history_stands_in_for_a_missing_baseline_and_says_so():
    rows = (COMPLETE, row("history.micro.deferred_median_ms", "pass", "no change point"),
            row("baseline.micro.speedup", "skip", NO_BASE))  # fmt: skip
    code, text, _ = outcome(*rows)
    assert code == 0 and f"regression checked by the history only ({NO_BASE})" in text


def test_a_busy_baseline_is_named_in_the_line():
    busy = row("baseline.micro.speedup", "pass", f"median ...; {BUSY_BASELINE}: busy host: ...")
    code, text, tone = outcome(COMPLETE, busy)
    assert code == 0 and tone == "unresolved"
    assert "1 regression rule(s) compared against a baseline measured on a busy host" in text
