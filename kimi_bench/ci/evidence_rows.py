"""Evidence of the row-based reports: serve-ab (one row per request) and parity (one row
per input). See ``evidence``: the report model checks the rows and every derived block
first (``report.agree_rows``); here the gate's figures are derived from the rows."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from kimi_bench.ci.evidence import (
    Evidence,
    EvidenceError,
    checked,
    micro_evidence,
    stopped,
    throughput_comparison,
    where_of,
)
from kimi_bench.ci.evidence_summary import summary_only_evidence
from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.compare import Comparison, compare
from kimi_bench.report import serve_figures
from kimi_bench.report.agree_rows import served as request_ok
from kimi_bench.report.model import Report
from kimi_bench.report.roles import baseline_arm, change_arm
from kimi_bench.results import derive_parity, has_fp32, parity_rows

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
    arms = report.summary.get("arms") or report.config.get("arms") or []
    return [str(a) for a in arms]


def _unit(row: dict[str, Any]) -> str:
    batch = row.get("batch_id")
    return str(batch) if batch is not None else f"r{row.get('rid')}"


def ttft_measurement(rows: list[dict[str, Any]], label: str) -> Measurement:
    """TTFTs of served requests; requests of one forward batch are one unit (emulated
    servers report ``batch_id``), otherwise each request is its own unit."""
    ok = [r for r in rows if request_ok(r)]
    units = [f"{r.get('repeat')}:{_unit(r)}" for r in ok]
    return Measurement([float(r["ttft_ms"]) for r in ok], unit="ms", label=label, unit_ids=units)


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
    seen = Counter((r["rate"], r["arm"], r.get("repeat", 0)) for r in rows)
    ok = Counter((r["rate"], r["arm"], r.get("repeat", 0)) for r in rows if request_ok(r))
    # --capacity: each arm's bisection probes its own rates; only those were planned
    probed = (
        {(str(r.get("rate")), str(r.get("arm"))) for r in report.results}
        if cfg.get("capacity")
        else None
    )
    failed = 0
    for rate in labels:
        for arm in arms:
            if probed is not None and (rate, arm) not in probed:
                continue
            for rep in range(repeats):
                got = seen.get((rate, arm, rep), 0)
                if got < planned:
                    ev.missing(f"rate {rate}, {arm}, repeat {rep}: {got} of {planned} requests")
                failed += planned - ok.get((rate, arm, rep), 0)
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
    ev.figures["ab"] = _ab(report, rows, labels, arms)
    stopped(report, ev)
    return ev


def _throughputs(report: Report, rate: str, arm: str) -> list[float]:
    for res in report.results:
        if str(res.get("rate")) == rate and str(res.get("arm")) == arm:
            v = res.get("req_per_s")
            return [float(v)] if isinstance(v, (int, float)) and math.isfinite(v) else []
    return []


def _ab(
    report: Report, rows: list[dict[str, Any]], labels: list[str], arms: list[str]
) -> dict[str, dict[str, dict[str, Comparison | None]]]:
    """Per rate, each arm vs the base arm: median/p90 TTFT from the request rows and
    throughput from the per-rate rows."""
    seed = int(report.config.get("seed") or 0)
    base = baseline_arm(report.config, arms) or arms[0]
    out: dict[str, dict[str, dict[str, Comparison | None]]] = {}
    for rate in labels:
        a = ttft_measurement([r for r in rows if r["rate"] == rate and r["arm"] == base], base)
        for arm in arms:
            if arm == base:
                continue
            b = ttft_measurement([r for r in rows if r["rate"] == rate and r["arm"] == arm], arm)
            got: dict[str, Comparison | None] = {}
            for name, q in (("median_ttft", 50), ("p90_ttft", 90)):
                got[name] = compare(a, b, q=q, seed=seed) if a.n and b.n else None
            ta, tb = _throughputs(report, rate, base), _throughputs(report, rate, arm)
            got["throughput"] = throughput_comparison(ta, tb, seed)
            slo = serve_figures.slos(report.config)
            if slo:
                good = [serve_figures.throughputs([r for r in rows if r["rate"] == rate
                                                   and r["arm"] == x], slo).get(
                    "goodput_req_per_s", []) for x in (base, arm)]  # fmt: skip
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
