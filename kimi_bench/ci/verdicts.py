"""One rule's outcome, and how a measured interval decides it.

A rule on a measured quantity with an interval (a speedup over repeats, a TTFT delta over
forward batches) passes when the whole interval is on the good side of the threshold,
fails when the whole interval is on the bad side, and is *inconclusive* when the
interval straddles the threshold: the run cannot tell pass from fail, and the rules'
``inconclusive`` policy decides (``warn``: not a failure, with a note; ``fail``).
"""

from __future__ import annotations

import math

from kimi_bench.report.gate_verdict import FAIL, INCONCLUSIVE, PASS, SKIP, RuleResult

__all__ = ["FAIL", "INCONCLUSIVE", "PASS", "SKIP", "RuleResult", "decide", "with_policy"]


def decide(
    value: float | None,
    low: float | None,
    high: float | None,
    limit: float,
    *,
    at_least: bool,
) -> str:
    """pass / fail / inconclusive of ``value`` (with its interval low..high) against
    ``limit``: ``at_least`` for minimum rules (value >= limit), else maximum rules."""
    if value is None or not math.isfinite(value):
        return FAIL
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        low = high = value
    good = (low >= limit) if at_least else (high <= limit)
    bad = (high < limit) if at_least else (low > limit)
    if good:
        return PASS
    if bad:
        return FAIL
    return INCONCLUSIVE


def with_policy(result: RuleResult, policy: str) -> RuleResult:
    """An inconclusive result under the ``fail`` policy fails, saying why; under ``warn``
    it stays inconclusive (not a failure) with a note."""
    if result.verdict != INCONCLUSIVE:
        return result
    if policy == "fail":
        result.verdict = FAIL
        result.reason = "inconclusive (policy: fail): " + result.reason
    else:
        result.reason = "inconclusive (policy: warn, not a failure): " + result.reason
    return result


def interval_text(low: float | None, high: float | None, fmt: str = "{:.2f}") -> str:
    if low is None or high is None:
        return ""
    return f" (interval {fmt.format(low)} .. {fmt.format(high)})"
