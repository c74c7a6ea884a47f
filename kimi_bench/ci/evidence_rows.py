"""Evidence of the row-based reports: serve-ab (one row per request) and parity (one row
per input). See ``evidence``: the report model checks the rows and every derived block
first (``report.agree_rows``); here the gate's figures are derived from the rows."""

from __future__ import annotations

import math

from kimi_bench.ci.evidence import (
    AB,
    Derived,
    Evidence,
    EvidenceError,
    GateConfig,
    ServeFigures,
    checked,
    micro_evidence,
    stopped,
    where_of,
)
from kimi_bench.ci.evidence_summary import stated_rows, summary_only_evidence
from kimi_bench.report.agree_serve import serve_arms
from kimi_bench.report.kinds import ServeSummary
from kimi_bench.report.model import Report
from kimi_bench.report.roles import change_arm
from kimi_bench.results.serve_compare import throughput_comparison, ttft_comparisons
from kimi_bench.results.serve_rows import GOODPUT

__all__ = ["evidence", "micro_evidence", "parity_evidence", "serve_evidence"]

# ------------------------------------------------------------------------------ serve-ab


def rate_labels(cfg: GateConfig) -> list[str]:
    if cfg.rate_labels:
        return [str(x) for x in cfg.rate_labels]
    return [
        "inf" if r is None or (isinstance(r, float) and math.isinf(r)) else f"{float(r):g}"
        for r in cfg.rates or []
    ]


def serve_evidence(report: Report) -> Evidence:
    derived = checked(report)
    w, cfg = where_of(report), derived.config
    labels, arms = rate_labels(cfg), serve_arms(report.config, report.summary)
    if cfg.per_request is False:  # imported from a peer's summary-only file
        return summary_only_evidence(report, derived, labels, arms)
    if not labels or not arms:
        raise EvidenceError(f"{w}: config names no rates or arms: nothing was planned")
    planned, repeats = cfg.requests, cfg.repeats or 1
    if planned is None or planned < 1:
        got = report.config.get("requests")  # as written: it may be of another type
        raise EvidenceError(f"{w}: config.requests must be a positive integer, got {got!r}")
    ev, d = Evidence("serve-ab", derived), derived.serve
    # --capacity: each arm's bisection probes its own rates; only those were planned
    probed = set(stated_rows(report)) if cfg.capacity else None
    failed = 0
    for rate in labels:
        for arm in arms:
            if probed is not None and (rate, arm) not in probed:
                continue
            seen, ok = d.cell(rate, arm).counts()
            for rep in range(repeats):
                got = seen.get(rep, 0)
                if got < planned:
                    ev.missing(f"rate {rate}, {arm}, repeat {rep}: {got} of {planned} requests")
                failed += planned - ok.get(rep, 0)
    stated = ServeSummary.model_validate(report.summary).failed_requests
    if stated is not None and stated < failed and ev.complete:
        raise EvidenceError(
            f"{w}: summary.failed_requests says {stated!r} but the request rows show {failed} "
            "failed: the summary disagrees with its raw data"
        )
    ev.serve = ServeFigures(failed, labels, arms, change_arm(report.config, arms),
                            _ab(report, derived, labels, arms))  # fmt: skip
    stopped(report, ev)
    return ev


def _ab(report: Report, derived: Derived, labels: list[str], arms: list[str]) -> AB:
    """Per rate, each arm vs the base arm: median/p90 TTFT from the request rows and
    throughput from the per-rate rows."""
    seed, d = derived.config.seed or 0, derived.serve
    base = d.base or arms[0]
    stated = stated_rows(report)

    def thr(rate: str, arm: str) -> list[float]:  # over the run's span: stated, not in rows
        row = stated.get((rate, arm))
        return row.throughput if row is not None else []

    out: AB = {}
    for rate in labels:
        a = d.cell(rate, base).measurement("ttft", base)
        for arm in arms:
            if arm == base:
                continue
            b = d.cell(rate, arm).measurement("ttft", arm)
            got = ttft_comparisons(a, b, seed)
            got["throughput"] = throughput_comparison(thr(rate, base), thr(rate, arm), seed)
            if d.slo:
                good = [d.cell(rate, x).throughputs.get(GOODPUT, []) for x in (base, arm)]
                got["goodput"] = throughput_comparison(good[0], good[1], seed)
            out.setdefault(rate, {})[arm] = got
    return out


# ------------------------------------------------------------------------------- parity


def parity_evidence(report: Report) -> Evidence:
    derived = checked(report)
    ev = Evidence("parity", derived)  # the rows' figures: ``ev.parity``, derived when read
    if not report.results:
        ev.missing("no inputs were compared")
    stopped(report, ev)
    return ev


def evidence(report: Report) -> Evidence:
    """The evidence of a report of a gated kind (EvidenceError when it cannot be trusted)."""
    by_kind = {"micro": micro_evidence, "serve-ab": serve_evidence, "parity": parity_evidence}
    if report.kind not in by_kind:
        raise EvidenceError(f"{where_of(report)}: kind {report.kind!r} has no evidence rules")
    return by_kind[report.kind](report)
