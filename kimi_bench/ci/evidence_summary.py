"""Evidence of a summary-only ``serve-ab`` report: one imported from a peer's result file
that holds no per-request data (``config.per_request`` false; see ``kimi_bench.peers``).

There is nothing to recompute TTFTs from, so none is trusted: every TTFT comparison is
absent (a TTFT delta rule fails by name) and only the counts are used: completeness
(completed + failed against the planned requests), failed requests, and throughput from
the per-arm rows. A request row in such a report is refused: the report would be lying
about what it holds.
"""

from __future__ import annotations

from typing import Any

from kimi_bench.ci.evidence import Evidence, EvidenceError, stopped, throughput_comparison, where_of
from kimi_bench.infra.stats.compare import Comparison
from kimi_bench.report.model import Report
from kimi_bench.report.roles import baseline_arm, change_arm


def summary_only_evidence(report: Report, labels: list[str], arms: list[str]) -> Evidence:
    w, cfg = where_of(report), report.config
    ev = Evidence("serve-ab")
    planned = cfg.get("requests")
    repeats = cfg.get("repeats") or 1
    if not isinstance(planned, int) or planned < 0:
        raise EvidenceError(f"{w}: config.requests must be an integer, got {planned!r}")
    rows = {(str(r.get("rate")), str(r.get("arm"))): r for r in report.results}
    failed = 0
    for rate in labels:
        for arm in arms:
            row = rows.get((rate, arm))
            if row is None:
                ev.missing(f"rate {rate}, {arm}: no row")
                failed += planned * repeats
                continue
            done = row.get("completed")
            if not isinstance(done, int):
                raise EvidenceError(f"{w}: results[{rate}, {arm}].completed is missing")
            if row.get("failed") is None:
                ev.missing(f"rate {rate}, {arm}: the file does not say how many requests failed")
                ev.figures["failed_unknown"] = True
            if done < planned * repeats:
                failed += int(planned * repeats - done)
    ev.figures["failed"] = failed
    ev.figures["rates"] = labels
    ev.figures["arms"] = arms
    ev.figures["change_arm"] = change_arm(report.config, arms)
    ev.figures["summary_only"] = True
    ev.figures["ab"] = _ab(report, labels, arms)
    stopped(report, ev)
    return ev


def _ab(
    report: Report, labels: list[str], arms: list[str]
) -> dict[str, dict[str, dict[str, Comparison | None]]]:
    seed = int(report.config.get("seed") or 0)
    base = baseline_arm(report.config, arms) or arms[0]
    out: dict[str, dict[str, dict[str, Comparison | None]]] = {}

    def thr(rate: str, arm: str) -> list[float]:
        for r in report.results:
            if str(r.get("rate")) == rate and str(r.get("arm")) == arm:
                v: Any = r.get("req_per_s")
                return [float(v)] if isinstance(v, (int, float)) else []
        return []

    for rate in labels:
        for arm in arms:
            if arm == base:
                continue
            ta, tb = thr(rate, base), thr(rate, arm)
            got: dict[str, Comparison | None] = {"median_ttft": None, "p90_ttft": None}
            got["throughput"] = throughput_comparison(ta, tb, seed)
            out.setdefault(rate, {})[arm] = got
    return out
