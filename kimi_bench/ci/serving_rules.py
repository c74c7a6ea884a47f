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

from kimi_bench.ci.evidence import Derived, Evidence, EvidenceError
from kimi_bench.ci.rules import RateRules
from kimi_bench.ci.verdicts import FAIL, PASS, RuleResult
from kimi_bench.report.agree_serve import slos
from kimi_bench.report.envelope import Loose, Number
from kimi_bench.results.base import typed_records
from kimi_bench.results.serve import LIMITS
from kimi_bench.results.serve_rows import RateRow

ABSOLUTE = tuple(LIMITS)
_WHY_NONE = {
    "itl": "no request streamed two tokens (run with --max-tokens 2 or more)",
    "tpot": "no request streamed two tokens (run with --max-tokens 2 or more)",
    "e2e": "no request has an end-to-end latency (older reports record TTFT only)",
    "ttft": "no request was served",
}


class ToolRow(RateRow):
    """A per-rate row of an imported report with the peer tool's own p99s."""

    tool_ttft_p99_ms: Loose[Number] = None
    tool_itl_p99_ms: Loose[Number] = None
    tool_tpot_p99_ms: Loose[Number] = None
    tool_e2e_p99_ms: Loose[Number] = None

    def p99(self, metric: str) -> float | None:
        return {"ttft": self.tool_ttft_p99_ms, "itl": self.tool_itl_p99_ms,
                "tpot": self.tool_tpot_p99_ms, "e2e": self.tool_e2e_p99_ms}[metric]  # fmt: skip


def _tool_figure(derived: Derived, rate: str, arm: str, metric: str) -> float | None:
    """An imported report's own p99 of ``metric`` where its rows cannot give it (a
    summary-only file; sglang's E2E and TPOT, which it writes no per-request E2E for;
    GuideLLM's ITL): the tool's figure, checked on import against what the rows bound."""
    if not derived.config.imported:
        return None
    rows = typed_records(derived.report.results, ToolRow, "results")
    return next((r.p99(metric) for r in rows if (r.rate, r.arm) == (rate, arm)), None)


def _figure(ev: Evidence, rate: str, arm: str, key: str, rule: str) -> tuple[float, str]:
    where = ev.derived.report.source or "report"
    cell, limit = ev.derived.serve.cell(rate, arm), LIMITS[key]
    v = limit.value(cell)
    if limit.metric is None:  # goodput
        if not ev.derived.serve.slo:
            raise EvidenceError(
                f"{where}: rule {rule}: the report has no goodput SLOs "
                "(run serve-ab with --goodput ttft:MS tpot:MS e2el:MS)"
            )
        if v is None:
            raise EvidenceError(
                f"{where}: rule {rule}: no client times to measure the "
                "duration goodput is counted over (an in-process or older report)"
            )
        return v, ""
    metric = limit.metric
    if v is None:
        tool = _tool_figure(ev.derived, rate, arm, metric)
        if tool is not None:
            return tool, " (the tool's own figure: its file has no per-request " + (
                f"{metric.upper()})")  # fmt: skip
        why = _WHY_NONE[metric]
        if ev.derived.config.imported:
            why = "the imported file states none and has no per-request data for it"
        raise EvidenceError(
            f"{where}: rule {rule}: the report has no {metric.upper()} "
            f"data at rate {rate} for {arm}: {why}"
        )
    return v, ""


def serving_rules(ev: Evidence, rate: str, arms: list[str], body: RateRules) -> list[RuleResult]:
    """The absolute rules of one rate table, one result per arm."""
    out: list[RuleResult] = []
    if body.min_goodput_delta is not None and not slos(ev.derived.report.config):
        raise EvidenceError(
            f"{ev.derived.report.source or 'report'}: rule [serve_ab.{rate}] min_goodput_delta: "
            "the report has no goodput SLOs (run serve-ab with --goodput ttft:MS tpot:MS e2el:MS)"
        )
    for key in ABSOLUTE:
        lim = getattr(body, key)
        if lim is None:
            continue
        for arm in arms:
            rule = f"serve_ab.{rate}.{arm}.{key}"
            v, source = _figure(ev, rate, arm, key, f"[serve_ab.{rate}] {key}")
            if key == "min_goodput":
                ok, why = v >= lim, f"goodput {v:.3g} req/s vs >= {lim:g}"
            else:
                ok, why = v <= lim, f"p99 {v:.1f} ms vs <= {lim:g} ms{source}"
            out.append(RuleResult(rule, v, lim, PASS if ok else FAIL, why))
    return out
