"""Evidence of a summary-only ``serve-ab`` report: one imported from a peer's result file
that holds no per-request data (``config.per_request`` false; see ``kimi_bench.peers``).

There is nothing to recompute TTFTs from, so none is trusted: every TTFT comparison is
absent (a TTFT delta rule fails by name) and only the counts are used: completeness
(completed + failed against the planned requests), failed requests, and throughput from
the per-arm rows. A request row in such a report is refused: the report would be lying
about what it holds.
"""

from __future__ import annotations

from kimi_bench.ci.evidence import (
    AB,
    Derived,
    Evidence,
    EvidenceError,
    ServeFigures,
    stopped,
    where_of,
)
from kimi_bench.report.model import Report
from kimi_bench.report.roles import baseline_arm, change_arm
from kimi_bench.results import ResultError
from kimi_bench.results.serve_compare import throughput_comparison
from kimi_bench.results.serve_rows import RateRow, rate_rows

Rows = dict[tuple[str, str], RateRow]


def stated_rows(report: Report) -> Rows:
    """The report's per-rate rows, typed (EvidenceError naming a field that is not)."""
    try:
        return rate_rows(report.results)
    except ResultError as exc:
        raise EvidenceError(f"{where_of(report)}: {exc}") from None


def summary_only_evidence(
    report: Report, derived: Derived, labels: list[str], arms: list[str]
) -> Evidence:
    w, cfg = where_of(report), derived.config
    ev = Evidence("serve-ab", derived)
    planned, repeats = cfg.requests, cfg.repeats or 1
    if planned is None:
        got = report.config.get("requests")  # as written: it may be of another type
        raise EvidenceError(f"{w}: config.requests must be an integer, got {got!r}")
    rows = stated_rows(report)
    figures = ServeFigures(0, labels, arms, change_arm(report.config, arms), summary_only=True)
    for rate in labels:
        for arm in arms:
            row = rows.get((rate, arm))
            if row is None:
                ev.missing(f"rate {rate}, {arm}: no row")
                figures.failed += planned * repeats
                continue
            if row.completed is None:
                raise EvidenceError(f"{w}: results[{rate}, {arm}].completed is missing")
            if row.failed is None:
                ev.missing(f"rate {rate}, {arm}: the file does not say how many requests failed")
                figures.failed_unknown = True
            if row.completed < planned * repeats:
                figures.failed += int(planned * repeats - row.completed)
    figures.ab = _ab(report, derived.config.seed or 0, rows, labels, arms)
    ev.serve = figures
    stopped(report, ev)
    return ev


def _ab(report: Report, seed: int, rows: Rows, labels: list[str], arms: list[str]) -> AB:
    """Throughput from the per-arm rows; no TTFT comparison (no request rows)."""
    base = baseline_arm(report.config, arms) or arms[0]
    out: AB = {}
    none = {"median_ttft": None, "p90_ttft": None}
    for rate in labels:
        for arm in (a for a in arms if a != base):
            a, b = rows.get((rate, base)), rows.get((rate, arm))
            thr = throughput_comparison(a.throughput if a else [], b.throughput if b else [], seed)
            out.setdefault(rate, {})[arm] = {**none, "throughput": thr}
    return out
