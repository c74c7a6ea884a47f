"""``compare``: two reports of the same kind side by side, with deltas and a rank test
(two-sided Mann-Whitney on the raw samples) where samples exist."""

from __future__ import annotations

import math
from typing import Any

from kimi_bench.baseline import mann_whitney_greater
from kimi_bench.bench.stats import median, percentile
from kimi_bench.report.model import Report, ReportError


def _p_two_sided(a: list[float], b: list[float]) -> float:
    if not a or not b:
        return math.nan
    return min(1.0, 2 * min(mann_whitney_greater(a, b), mann_whitney_greater(b, a)))


def _delta(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not a or math.isnan(a) or math.isnan(b):
        return None
    return (b - a) / a


def compare_reports(a: Report, b: Report) -> list[dict[str, Any]]:
    if a.kind != b.kind:
        raise ReportError(f"cannot compare a {a.kind!r} report with a {b.kind!r} report")
    if a.kind == "micro":
        return _micro(a, b)
    if a.kind == "serve-ab":
        return _serve(a, b)
    if a.kind == "parity":
        return _parity(a, b)
    raise ReportError(f"compare does not handle {a.kind!r} reports")


def _micro(a: Report, b: Report) -> list[dict[str, Any]]:
    rows = []
    arms_a, arms_b = a.data["arms"], b.data["arms"]
    for arm in [x for x in arms_a if x in arms_b]:
        sa, sb = arms_a[arm], arms_b[arm]
        pairs = [
            (
                s,
                sa["stages"][s].get("samples_ms", []),
                sb["stages"].get(s, {}).get("samples_ms", []),
            )
            for s in sa["stages"]
        ]
        pairs.append(("TOTAL", sa["total_ms"]["samples"], sb["total_ms"]["samples"]))
        for stage, xa, xb in pairs:
            if not xa and not xb:
                continue
            ma, mb = (median(xa) if xa else None), (median(xb) if xb else None)
            rows.append(
                {
                    "arm": arm,
                    "stage": stage,
                    "A_median_ms": ma,
                    "B_median_ms": mb,
                    "delta": _delta(ma, mb),
                    "p_value": _p_two_sided(xa, xb),
                }
            )
    return rows


def _serve(a: Report, b: Report) -> list[dict[str, Any]]:
    def samples(rep: Report, rate: str, arm: str) -> list[float]:
        return [
            r["ttft_ms"]
            for r in rep.data["requests"]
            if r["rate"] == rate and r["arm"] == arm and r.get("ttft_ms") is not None
        ]

    rows = []
    thr_b = {(r["rate"], r["arm"]): r["req_per_s"] for r in b.results}
    for r in a.results:
        key = (r["rate"], r["arm"])
        xa, xb = samples(a, *key), samples(b, *key)
        mb = median(xb) if xb else None
        rows.append(
            {
                "rate": key[0],
                "arm": key[1],
                "A_ttft_median_ms": r.get("ttft_median_ms"),
                "B_ttft_median_ms": mb,
                "delta": _delta(r.get("ttft_median_ms"), mb),
                "A_p90_ms": r.get("ttft_p90_ms"),
                "B_p90_ms": percentile(xb, 90) if xb else None,
                "A_req_per_s": r.get("req_per_s"),
                "B_req_per_s": thr_b.get(key),
                "p_value": _p_two_sided(xa, xb),
            }
        )
    return rows


def _parity(a: Report, b: Report) -> list[dict[str, Any]]:
    rb = {r["name"]: r for r in b.results}
    rows = []
    for r in a.results:
        other = rb.get(r["name"], {})
        same = (r.get("bit_exact_fp32"), r.get("bit_exact_bf16")) == (
            other.get("bit_exact_fp32"),
            other.get("bit_exact_bf16"),
        )
        rows.append(
            {
                "name": r["name"],
                "A_bit_exact": r.get("bit_exact_fp32"),
                "B_bit_exact": other.get("bit_exact_fp32"),
                "A_deferred": r.get("deferred"),
                "B_deferred": other.get("deferred"),
                "changed": not same,
            }
        )
    return rows
