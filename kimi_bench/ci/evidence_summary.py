"""Evidence of a summary-only ``serve-ab`` report: one imported from a peer's result file
that holds no per-request data (``config.per_request`` false; see ``kimi_bench.peers``).

There is nothing to recompute TTFTs from, so none is trusted: every TTFT comparison is
absent (a TTFT delta rule fails by name) and only the counts are used: completeness
(completed + failed against the planned requests), failed requests, and throughput from
the per-arm rows. A request row in such a report is refused: the report would be lying
about what it holds.
"""

from __future__ import annotations

from kimi_bench.ci.evidence import Evidence, EvidenceError, stopped, where_of
from kimi_bench.infra.stats.compare import Comparison
from kimi_bench.report.model import Report
from kimi_bench.report.roles import baseline_arm, change_arm
from kimi_bench.results import ResultError
from kimi_bench.results.serve_compare import throughput_comparison
from kimi_bench.results.serve_rows import RateRow, rate_rows


def stated_rows(report: Report) -> dict[tuple[str, str], RateRow]:
    """The report's per-rate rows, typed (EvidenceError naming a field that is not)."""
    try:
        return rate_rows(report.results)
    except ResultError as exc:
        raise EvidenceError(f"{where_of(report)}: {exc}") from None


def summary_only_evidence(report: Report, labels: list[str], arms: list[str]) -> Evidence:
    w, cfg = where_of(report), report.config
    ev = Evidence("serve-ab")
    planned = cfg.get("requests")
    repeats = cfg.get("repeats") or 1
    if not isinstance(planned, int) or planned < 0:
        raise EvidenceError(f"{w}: config.requests must be an integer, got {planned!r}")
    rows = stated_rows(report)
    failed = 0
    for rate in labels:
        for arm in arms:
            row = rows.get((rate, arm))
            if row is None:
                ev.missing(f"rate {rate}, {arm}: no row")
                failed += planned * repeats
                continue
            if row.completed is None:
                raise EvidenceError(f"{w}: results[{rate}, {arm}].completed is missing")
            if row.failed is None:
                ev.missing(f"rate {rate}, {arm}: the file does not say how many requests failed")
                ev.figures["failed_unknown"] = True
            if row.completed < planned * repeats:
                failed += int(planned * repeats - row.completed)
    ev.figures["failed"] = failed
    ev.figures["rates"] = labels
    ev.figures["arms"] = arms
    ev.figures["change_arm"] = change_arm(report.config, arms)
    ev.figures["summary_only"] = True
    ev.figures["ab"] = _ab(report, rows, labels, arms)
    stopped(report, ev)
    return ev


def _ab(
    report: Report, rows: dict[tuple[str, str], RateRow], labels: list[str], arms: list[str]
) -> dict[str, dict[str, dict[str, Comparison | None]]]:
    seed = int(report.config.get("seed") or 0)
    base = baseline_arm(report.config, arms) or arms[0]
    out: dict[str, dict[str, dict[str, Comparison | None]]] = {}

    def thr(rate: str, arm: str) -> list[float]:
        row = rows.get((rate, arm))
        return row.throughput if row is not None else []

    for rate in labels:
        for arm in arms:
            if arm == base:
                continue
            got: dict[str, Comparison | None] = {"median_ttft": None, "p90_ttft": None}
            got["throughput"] = throughput_comparison(thr(rate, base), thr(rate, arm), seed)
            out.setdefault(rate, {})[arm] = got
    return out
