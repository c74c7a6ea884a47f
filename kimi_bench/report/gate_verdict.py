"""The gate's verdict from its rule rows (``RuleResult``): one function
for ``kimi-bench gate``, ``kimi-bench run``, ``gate.md`` and ``index.html``, so that each
says the same thing in the same words.

A verdict is more than pass or fail (issue 42):

- **no regression check**: the rules asked for regression (``baseline.*``) rules and every
  one of them was skipped because no comparable baseline was found. That is not a plain
  PASS: the line says no regression check was made and why (the skipped rules' reason),
  and the gate exits with its own code unless ``--allow-no-baseline`` (a scenario's
  ``[gate] allow_no_baseline``, true by default for ``kimi-bench run``) accepted it, which
  the skipped rows record (``ACCEPTED``);
- **history waiting**: ``--history`` holds too few runs for a change point: the gate
  passes and says how many more runs it needs;
- **busy baseline**: a baseline measured on a busy host (its own host-load warning) is
  named in the verdict, not only in the rule's reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kimi_bench.report.verdicts import Line, Tone

PASS, FAIL, SKIP, INCONCLUSIVE = "pass", "fail", "skip", "inconclusive"


Value = float | bool | str | None  # a measured figure or a limit (a number, a flag, a text)


@dataclass
class RuleResult:
    """One rule's outcome on one report (``ci.verdicts`` decides it); the gate's rows."""

    rule: str
    measured: Value
    limit: Value
    verdict: str  # pass, fail, skip or inconclusive
    reason: str
    report: str = ""  # which report the rule was applied to

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL

    def as_dict(self) -> dict[str, Value | str]:
        return {
            "report": self.report,
            "rule": self.rule,
            "measured": self.measured,
            "limit": self.limit,
            "verdict": self.verdict,
            "reason": self.reason,
        }


# markers the rule reasons carry (written by ``ci.baseline`` and ``ci.history``)
NO_BASELINE = "no baseline"  # the reason of a baseline rule skipped for want of one
ACCEPTED = "accepted: --allow-no-baseline, or a scenario's [gate] allow_no_baseline"
BUSY_BASELINE = "the baseline's host was busy"
HISTORY_WAITING = re.compile(r"^(\d+) runs?: (\d+) more needed")


@dataclass(frozen=True)
class GateSummary:
    """What the rule rows add up to."""

    counts: dict[str, int]
    total: int
    checked: int  # rules evaluated (not skipped), the always-applied completeness ones aside
    no_baseline: str | None  # why, when every baseline rule was skipped (none found)
    accepted: bool  # ... and --allow-no-baseline accepted that
    waiting: int | None  # more history runs needed (every history rule waiting), else None
    busy_baselines: int  # baseline rules whose baseline carries a host-load warning
    history_checked: bool  # a history rule was evaluated

    @property
    def failed(self) -> bool:
        return bool(self.counts["fail"])

    @property
    def no_regression(self) -> str | None:
        """Why no regression check was made: every baseline rule skipped, and no history
        rule evaluated nor waiting for runs (a history the user chose stands in)."""
        return self.no_baseline if self.waiting is None and not self.history_checked else None

    @property
    def nothing_checked(self) -> bool:
        return not self.checked and self.waiting is None


def _rows(results: Sequence[RuleResult], prefix: str) -> list[RuleResult]:
    return [g for g in results if g.rule.startswith(prefix)]


def _waiting(history: list[RuleResult]) -> int | None:
    """More runs the history needs when none of its rules could be evaluated yet."""
    if not history or any(g.verdict != SKIP for g in history):
        return None
    need = []
    for g in history:
        m = HISTORY_WAITING.match(g.reason)
        if m is None:
            return None
        need.append((int(m.group(1)) > 0, int(m.group(2))))
    with_runs = [n for has, n in need if has]
    return max(with_runs or [n for _, n in need])


def summarize(results: Sequence[RuleResult]) -> GateSummary:
    counts = {
        v: sum(1 for g in results if g.verdict == v) for v in (PASS, FAIL, INCONCLUSIVE, SKIP)
    }
    checked = [g for g in results if g.verdict != SKIP and not g.rule.endswith(".complete")]
    base, history = _rows(results, "baseline."), _rows(results, "history.")
    waiting = _waiting(history)
    history_checked = any(g.verdict != SKIP for g in history)
    skipped = [g for g in base if g.verdict == SKIP]
    no_baseline = None
    if base and len(skipped) == len(base):
        no_baseline = skipped[0].reason or NO_BASELINE
    busy = sum(1 for g in base if BUSY_BASELINE in g.reason)
    accepted = bool(skipped) and all(ACCEPTED in g.reason for g in skipped)
    return GateSummary(
        counts, len(results), len(checked), no_baseline, accepted, waiting, busy, history_checked
    )


def _pass_text(s: GateSummary) -> str:
    parts = [f"{s.counts['pass']} passed"]
    parts += [f"{s.counts['inconclusive']} inconclusive"] if s.counts["inconclusive"] else []
    parts += [f"{s.counts['skip']} skipped"] if s.counts["skip"] else []
    return f"{', '.join(parts)} of {s.total} rules"


def gate_line(results: Sequence[RuleResult]) -> Line:
    """The gate's verdict line from its rule rows."""
    s = summarize(results)
    busy = (
        f"; {s.busy_baselines} regression rule(s) compared against a baseline measured on a "
        "busy host (its own host-load warning): a shift there may be the host's"
        if s.busy_baselines
        else ""
    )
    if s.failed:
        return Line(f"gate FAIL: {s.counts['fail']} of {s.total} rules{busy}", "bad")
    if s.nothing_checked:
        text = "gate FAIL: no rule was evaluated on these reports (nothing was checked)"
        return Line(text, "bad")
    why = (s.no_baseline or "").removesuffix(f" ({ACCEPTED})")
    if s.no_regression is not None:
        if s.accepted:
            text = f"gate PASS with no regression check: {why} ({ACCEPTED}); {_pass_text(s)}"
            return Line(text, "unresolved")
        text = (
            f"gate NO REGRESSION CHECK: every regression rule was skipped: {why} (give "
            f"--baseline, or --allow-no-baseline to accept this); {_pass_text(s)}"
        )
        return Line(text, "bad")
    if s.waiting is not None:
        text = (
            f"gate PASS: the history is too short for a change point: {s.waiting} more "
            f"run(s) needed"
            + (f"; no baseline either: {why}" if s.no_baseline else "")
            + f"; {_pass_text(s)}"
        )
        return Line(text, "unresolved")
    history_only = f"; regression checked by the history only ({why})" if s.no_baseline else ""
    tone: Tone = "unresolved" if s.counts["inconclusive"] or s.busy_baselines else "good"
    return Line(f"gate PASS: {_pass_text(s)}{busy}{history_only}", tone)
