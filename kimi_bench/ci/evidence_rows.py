"""Evidence of the row-based reports: serve-ab (one row per request) and parity (one row
per input). See ``evidence`` for the rules: derive, compare with the summary, refuse what
disagrees or is invalid, and decide completeness from what is present."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from kimi_bench.ci.evidence import (
    Evidence,
    EvidenceError,
    agree,
    agree_flag,
    as_list,
    micro_evidence,
    number,
    stopped,
    throughput_comparison,
    where_of,
)
from kimi_bench.ci.evidence_summary import summary_only_evidence
from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.compare import Comparison, compare
from kimi_bench.report.model import Report

# ------------------------------------------------------------------------------ serve-ab


def request_ok(row: dict[str, Any]) -> bool:
    """A request counts as served only with no error, a TTFT and a 2xx (or no) status."""
    status = row.get("status")
    good_status = status is None or (isinstance(status, int) and 200 <= status < 300)
    return row.get("error") is None and row.get("ttft_ms") is not None and good_status


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


def _check_rows(rows: list[Any], w: str) -> None:
    for i, row in enumerate(rows):
        at = f"{w}: requests[{i}]"
        if not isinstance(row, dict):
            raise EvidenceError(f"{at} is not an object")
        for key in ("rate", "arm"):
            if not isinstance(row.get(key), str):
                raise EvidenceError(f"{at}.{key} is missing")
        if row.get("ttft_ms") is not None:
            number(row["ttft_ms"], f"{at}.ttft_ms")
        for key, v in row.items():
            if key.endswith("_ms") and v is not None and key != "ttft_ms":
                number(v, f"{at}.{key}", minimum=None)
            if key.endswith("_bytes") and v is not None:
                number(v, f"{at}.{key}")
        status = row.get("status")
        if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
            raise EvidenceError(f"{at}.status must be an integer, got {status!r}")


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
    w, cfg = where_of(report), report.config
    if cfg.get("per_request") is False:  # imported from a peer's summary-only file
        return summary_only_evidence(report, rate_labels(cfg), serve_arms(report))
    ev = Evidence("serve-ab")
    rows = as_list(report.data.get("requests"), f"{w}: requests")
    _check_rows(rows, w)
    labels, arms = rate_labels(cfg), serve_arms(report)
    if not labels or not arms:
        raise EvidenceError(f"{w}: config names no rates or arms: nothing was planned")
    planned = cfg.get("requests")
    repeats = cfg.get("repeats") or 1
    if not isinstance(planned, int) or planned < 1:
        raise EvidenceError(f"{w}: config.requests must be a positive integer, got {planned!r}")
    seen = Counter((r["rate"], r["arm"], r.get("repeat", 0)) for r in rows)
    ok = Counter((r["rate"], r["arm"], r.get("repeat", 0)) for r in rows if request_ok(r))
    failed = 0
    for rate in labels:
        for arm in arms:
            for rep in range(repeats):
                got = seen.get((rate, arm, rep), 0)
                if got < planned:
                    ev.missing(f"rate {rate}, {arm}, repeat {rep}: {got} of {planned} requests")
                failed += planned - ok.get((rate, arm, rep), 0)
    ev.figures["failed"] = failed
    ev.figures["rates"] = labels
    _results_agree(report, rows, w)
    stated = report.summary.get("failed_requests")
    claimed = None if stated is None else number(stated, f"{w}: summary.failed_requests")
    if claimed is not None and claimed < failed and ev.complete:
        raise EvidenceError(
            f"{w}: summary.failed_requests says {stated!r} but the request rows show {failed} "
            "failed: the summary disagrees with its raw data"
        )
    ev.figures["ab"] = _ab(report, rows, labels, arms, w)
    stopped(report, ev)
    return ev


def _results_agree(report: Report, rows: list[dict[str, Any]], w: str) -> None:
    """Each per-rate row's ``completed`` must be the served requests counted from rows."""
    served = Counter((r["rate"], r["arm"]) for r in rows if request_ok(r))
    for i, res in enumerate(report.results):
        if not isinstance(res, dict) or "completed" not in res:
            continue
        key = (str(res.get("rate")), str(res.get("arm")))
        agree(res["completed"], float(served.get(key, 0)), f"{w}: results[{i}].completed")
        if res.get("failed") is not None:
            number(res["failed"], f"{w}: results[{i}].failed")


def _base(arms: list[str]) -> str:
    return "eager" if "eager" in arms else arms[0]


def _throughputs(report: Report, rate: str, arm: str) -> list[float]:
    for res in report.results:
        if str(res.get("rate")) == rate and str(res.get("arm")) == arm:
            v = res.get("req_per_s")
            return [float(v)] if isinstance(v, (int, float)) and math.isfinite(v) else []
    return []


def _ab(
    report: Report, rows: list[dict[str, Any]], labels: list[str], arms: list[str], w: str
) -> dict[str, dict[str, dict[str, Comparison | None]]]:
    """Per rate, each arm vs the base arm: median/p90 TTFT from the request rows (checked
    against the report's own ``ab`` numbers) and throughput from the per-rate rows."""
    seed = int(report.config.get("seed") or 0)
    stored = report.data.get("ab") or {}
    base = _base(arms)
    out: dict[str, dict[str, dict[str, Comparison | None]]] = {}
    for rate in labels:
        a_rows = [r for r in rows if r["rate"] == rate and r["arm"] == base]
        a = ttft_measurement(a_rows, base)
        for arm in arms:
            if arm == base:
                continue
            b = ttft_measurement([r for r in rows if r["rate"] == rate and r["arm"] == arm], arm)
            got: dict[str, Comparison | None] = {}
            for name, q in (("median_ttft", 50), ("p90_ttft", 90)):
                got[name] = compare(a, b, q=q, seed=seed) if a.n and b.n else None
                old = ((stored.get(rate) or {}).get(arm) or {}).get(name) or {}
                if got[name] is not None and old.get("delta_pct") is not None:
                    agree(old["delta_pct"], got[name].delta_pct,  # type: ignore[union-attr]
                          f"{w}: ab.{rate}.{arm}.{name}.delta_pct")  # fmt: skip
            ta, tb = _throughputs(report, rate, base), _throughputs(report, rate, arm)
            got["throughput"] = throughput_comparison(ta, tb, seed)
            out.setdefault(rate, {})[arm] = got
    return out


# ------------------------------------------------------------------------------- parity


def parity_evidence(report: Report) -> Evidence:
    w, s = where_of(report), report.summary
    ev = Evidence("parity")
    rows = as_list(report.results, f"{w}: results")
    accepted = 0
    bad_fp32: list[str] = []
    bad_bf16: list[str] = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise EvidenceError(f"{w}: results[{i}] has no name")
        if row.get("error") is not None:
            continue
        accepted += 1
        for key, into in (("bit_exact_fp32", bad_fp32), ("bit_exact_bf16", bad_bf16)):
            v = row.get(key)
            if not isinstance(v, bool):
                raise EvidenceError(f"{w}: results[{i}].{key} must be true or false, got {v!r}")
            if not v:
                into.append(row["name"])
    bad = sorted(set(bad_fp32) | set(bad_bf16))
    agree(s.get("inputs"), float(len(rows)), f"{w}: summary.inputs")
    agree(s.get("accepted"), float(accepted), f"{w}: summary.accepted")
    for key, which in (("all_bit_exact_fp32", bad_fp32), ("all_bit_exact_bf16", bad_bf16)):
        agree_flag(s.get(key), accepted > 0 and not which, f"{w}: summary.{key}")
    stated_diff = s.get("differing")
    if isinstance(stated_diff, list) and sorted(map(str, stated_diff)) != bad:
        raise EvidenceError(
            f"{w}: summary.differing lists {stated_diff!r} but the rows differ in {bad!r}: the "
            "summary disagrees with its raw data"
        )
    ev.figures.update(accepted=accepted, differing=bad, all_bit_exact=accepted > 0 and not bad)
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
