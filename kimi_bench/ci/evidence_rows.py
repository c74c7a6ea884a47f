"""Evidence of the row-based reports: serve-ab (one row per request) and parity (one row
per input). See ``evidence``: the report model checks the rows and every derived block
first (``report.agree_rows``); here the gate's figures are derived from the rows."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kimi_bench.ci.evidence import (
    Evidence,
    EvidenceError,
    checked,
    micro_evidence,
    stopped,
    where_of,
)
from kimi_bench.ci.evidence_summary import stated_rows, summary_only_evidence
from kimi_bench.infra.stats.compare import Comparison
from kimi_bench.report import agree_serve
from kimi_bench.report.agree_serve import derive_report
from kimi_bench.report.model import Report
from kimi_bench.report.roles import change_arm
from kimi_bench.results import derive_parity, has_fp32, parity_rows
from kimi_bench.results.serve import ServeDerived
from kimi_bench.results.serve_compare import throughput_comparison, ttft_comparisons
from kimi_bench.results.serve_rows import GOODPUT, ServeRequest

__all__ = ["evidence", "micro_evidence", "parity_evidence", "request_ok", "serve_evidence"]

# ------------------------------------------------------------------------------ serve-ab


def rate_labels(cfg: dict[str, Any]) -> list[str]:
    labels = cfg.get("rate_labels")
    if isinstance(labels, list) and labels:
        return [str(x) for x in labels]
    out = []
    for r in cfg.get("rates") or []:
        if r is None or (isinstance(r, float) and math.isinf(r)):
            out.append("inf")
        else:
            out.append(f"{float(r):g}")
    return out


def serve_arms(report: Report) -> list[str]:
    return agree_serve.serve_arms(report.config, report.summary)


def request_ok(row: Mapping[str, Any]) -> bool:
    """A request row (as read from a report) that counts as served (``ServeRequest.served``)."""
    return ServeRequest.model_validate(row).served


def serve_evidence(report: Report) -> Evidence:
    checked(report)
    w, cfg = where_of(report), report.config
    if cfg.get("per_request") is False:  # imported from a peer's summary-only file
        return summary_only_evidence(report, rate_labels(cfg), serve_arms(report))
    ev = Evidence("serve-ab")
    rows = report.data["requests"]
    labels, arms = rate_labels(cfg), serve_arms(report)
    if not labels or not arms:
        raise EvidenceError(f"{w}: config names no rates or arms: nothing was planned")
    planned = cfg.get("requests")
    repeats = cfg.get("repeats") or 1
    if not isinstance(planned, int) or planned < 1:
        raise EvidenceError(f"{w}: config.requests must be a positive integer, got {planned!r}")
    derived = derive_report(cfg, report.summary, rows)
    # --capacity: each arm's bisection probes its own rates; only those were planned
    probed = set(stated_rows(report)) if cfg.get("capacity") else None
    failed = 0
    for rate in labels:
        for arm in arms:
            if probed is not None and (rate, arm) not in probed:
                continue
            seen, ok = derived.cell(rate, arm).counts()
            for rep in range(repeats):
                got = seen.get(rep, 0)
                if got < planned:
                    ev.missing(f"rate {rate}, {arm}, repeat {rep}: {got} of {planned} requests")
                failed += planned - ok.get(rep, 0)
    ev.figures["failed"] = failed
    ev.figures["rates"] = labels
    ev.figures["arms"] = arms
    ev.figures["change_arm"] = change_arm(cfg, arms)
    stated = report.summary.get("failed_requests")
    if isinstance(stated, int) and stated < failed and ev.complete:
        raise EvidenceError(
            f"{w}: summary.failed_requests says {stated!r} but the request rows show {failed} "
            "failed: the summary disagrees with its raw data"
        )
    ev.figures["ab"] = _ab(report, derived, labels, arms)
    stopped(report, ev)
    return ev


def _ab(
    report: Report, derived: ServeDerived, labels: list[str], arms: list[str]
) -> dict[str, dict[str, dict[str, Comparison | None]]]:
    """Per rate, each arm vs the base arm: median/p90 TTFT from the request rows and
    throughput from the per-rate rows."""
    seed = int(report.config.get("seed") or 0)
    base = derived.base or arms[0]
    stated = stated_rows(report)

    def thr(rate: str, arm: str) -> list[float]:  # over the run's span: stated, not in rows
        row = stated.get((rate, arm))
        return row.throughput if row is not None else []

    out: dict[str, dict[str, dict[str, Comparison | None]]] = {}
    for rate in labels:
        a = derived.cell(rate, base).measurement("ttft", base)
        for arm in arms:
            if arm == base:
                continue
            b = derived.cell(rate, arm).measurement("ttft", arm)
            got = ttft_comparisons(a, b, seed)
            got["throughput"] = throughput_comparison(thr(rate, base), thr(rate, arm), seed)
            if derived.slo:
                good = [derived.cell(rate, x).throughputs.get(GOODPUT, []) for x in (base, arm)]
                got["goodput"] = throughput_comparison(good[0], good[1], seed)
            out.setdefault(rate, {})[arm] = got
    return out


# ------------------------------------------------------------------------------- parity


def parity_evidence(report: Report) -> Evidence:
    checked(report)
    ev = Evidence("parity")
    rows = report.results
    fp32 = has_fp32(report.config)
    d = derive_parity(parity_rows(rows, fp32), fp32)
    ev.figures.update(accepted=d.accepted, differing=sorted(d.exactness_differing),
                      rejected=list(d.rejected), all_bit_exact=d.all_bit_exact,
                      fp32_checked=fp32)  # fmt: skip
    if not rows:
        ev.missing("no inputs were compared")
    stopped(report, ev)
    return ev


def evidence(report: Report) -> Evidence:
    """The evidence of a report of a gated kind (EvidenceError when it cannot be trusted)."""
    by_kind = {"micro": micro_evidence, "serve-ab": serve_evidence, "parity": parity_evidence}
    if report.kind not in by_kind:
        raise EvidenceError(f"{where_of(report)}: kind {report.kind!r} has no evidence rules")
    return by_kind[report.kind](report)
