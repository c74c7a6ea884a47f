"""Gate rules on serving figures at one rate (``[serve_ab.<rate>]``): absolute limits every
arm must meet (``min_goodput`` in req/s, ``max_p99_ttft_ms``, ``max_p99_itl_ms``,
``max_p99_tpot_ms``, ``max_p99_e2e_ms``), recomputed from the request rows
(``results.serve``). A rule whose figure the report cannot give is refused
(``EvidenceError``, exit 2) with the rule named and why: no SLOs were recorded for goodput,
no request streamed two tokens for ITL/TPOT, no client times for goodput's duration. An
imported report whose file has no per-request figure for the rule (a summary export;
sglang's E2E and TPOT) is held to the tool's own p99, checked on import, and the reason
says so."""

from __future__ import annotations

from typing import Any

from kimi_bench.ci.evidence import EvidenceError
from kimi_bench.ci.verdicts import FAIL, PASS, RuleResult
from kimi_bench.report.agree_serve import derive_report, slos
from kimi_bench.report.model import Report
from kimi_bench.results.serve import LIMITS, ServeDerived

ABSOLUTE = tuple(LIMITS)
_WHY_NONE = {
    "itl": "no request streamed two tokens (run with --max-tokens 2 or more)",
    "tpot": "no request streamed two tokens (run with --max-tokens 2 or more)",
    "e2e": "no request has an end-to-end latency (older reports record TTFT only)",
    "ttft": "no request was served",
}


def _tool_figure(report: Report, rate: str, arm: str, metric: str) -> float | None:
    """An imported report's own p99 of ``metric`` where its rows cannot give it (a
    summary-only file; sglang's E2E and TPOT, which it writes no per-request E2E for;
    GuideLLM's ITL): the tool's figure, checked on import against what the rows bound."""
    if not report.config.get("imported"):
        return None
    for row in report.results:
        if str(row.get("rate")) == rate and str(row.get("arm")) == arm:
            v = row.get(f"tool_{metric}_p99_ms")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
    return None


def _figure(
    report: Report, derived: ServeDerived, rate: str, arm: str, key: str, rule: str
) -> tuple[float, str]:
    cell, limit = derived.cell(rate, arm), LIMITS[key]
    v = limit.value(cell)
    if limit.metric is None:  # goodput
        if not derived.slo:
            raise EvidenceError(
                f"{report.source or 'report'}: rule {rule}: the report has no goodput SLOs "
                "(run serve-ab with --goodput ttft:MS tpot:MS e2el:MS)"
            )
        if v is None:
            raise EvidenceError(
                f"{report.source or 'report'}: rule {rule}: no client times to measure the "
                "duration goodput is counted over (an in-process or older report)"
            )
        return v, ""
    metric = limit.metric
    if v is None:
        tool = _tool_figure(report, rate, arm, metric)
        if tool is not None:
            return tool, " (the tool's own figure: its file has no per-request " + (
                f"{metric.upper()})")  # fmt: skip
        why = _WHY_NONE[metric]
        if report.config.get("imported"):
            why = "the imported file states none and has no per-request data for it"
        raise EvidenceError(
            f"{report.source or 'report'}: rule {rule}: the report has no {metric.upper()} "
            f"data at rate {rate} for {arm}: {why}"
        )
    return v, ""


def serving_rules(
    report: Report, rate: str, arms: list[str], body: dict[str, Any]
) -> list[RuleResult]:
    """The absolute rules of one rate table, one result per arm."""
    out: list[RuleResult] = []
    if body.get("min_goodput_delta") is not None and not slos(report.config):
        raise EvidenceError(
            f"{report.source or 'report'}: rule [serve_ab.{rate}] min_goodput_delta: the report "
            "has no goodput SLOs (run serve-ab with --goodput ttft:MS tpot:MS e2el:MS)"
        )
    if not any(body.get(key) is not None for key in ABSOLUTE):
        return out
    derived = derive_report(report.config, report.summary, report.data.get("requests") or [])
    for key in ABSOLUTE:
        lim = body.get(key)
        if lim is None:
            continue
        for arm in arms:
            rule = f"serve_ab.{rate}.{arm}.{key}"
            v, source = _figure(report, derived, rate, arm, key, f"[serve_ab.{rate}] {key}")
            if key == "min_goodput":
                ok, why = v >= lim, f"goodput {v:.3g} req/s vs >= {lim:g}"
            else:
                ok, why = v <= lim, f"p99 {v:.1f} ms vs <= {lim:g} ms{source}"
            out.append(RuleResult(rule, v, lim, PASS if ok else FAIL, why))
    return out
