"""GuideLLM 0.8.1 and AIPerf 0.13 result files for the tests (see ``tests.peers.fixtures``):
the same synthetic requests in each tool's layout, summaries by each tool's arithmetic."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tests.peers.fixtures import Req, Run

T0 = 1796108600.0


def _peak(run: Run) -> int:
    events = sorted([(r.start, 1) for r in run.reqs] + [(r.end, -1) for r in run.reqs])
    cur = top = 0
    for _, d in events:
        cur += d
        top = max(top, cur)
    return top


# ------------------------------------------------------------------------------ GuideLLM


def _weighted(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    """GuideLLM's summary of (value, weight) pairs: equal values merged, zero weights
    dropped; a percentile is the first value whose cumulative share reaches it."""
    merged: dict[float, float] = {}
    for v, w in pairs:
        merged[v] = merged.get(v, 0.0) + w
    items = sorted((v, w) for v, w in merged.items() if w > 0)
    total = sum(w for _, w in items)
    probs = [w / total for _, w in items]
    cdf = np.cumsum(probs)

    def pick(q: float) -> float:
        return items[min(int(np.searchsorted(cdf, q, side="left")), len(items) - 1)][0]

    pct = {f"p{k}": pick(q) for k, q in (("50", 0.5), ("90", 0.9), ("95", 0.95), ("99", 0.99))}
    return {
        "mean": float(sum(v * p for (v, _), p in zip(items, probs, strict=True))),
        "median": pct["p50"],
        "min": items[0][0],
        "max": items[-1][0],
        "count": len(pairs),
        "percentiles": pct,
    }


def _gl_request(i: int, r: Req) -> dict[str, Any]:
    start = T0 + r.start
    first = start + r.ttft
    last = first + sum(r.gaps)
    n = r.output_len
    rid = f"req-{i:04d}"
    return {
        "type_": "generative_request_stats",
        "request_id": rid,
        "info": {
            "request_id": rid,
            "error": r.error,
            "status": "errored" if r.error else "completed",
        },
        "request_start_time": start,
        "request_end_time": T0 + r.end,
        "request_latency": None if r.error else r.latency,
        "prompt_tokens": r.input_len,
        "output_tokens": None if r.error else n,
        "time_to_first_token_ms": None if r.error else r.ttft * 1e3,
        "time_per_output_token_ms": None if r.error else 1e3 * (last - start) / n,
        "inter_token_latency_ms": None if r.error or n <= 1 else 1e3 * (last - first) / (n - 1),
    }


def guidellm(run: Run) -> dict[str, Any]:
    """``guidellm run ... --output kind=json`` with one benchmark of ``run``'s load."""
    reqs = [_gl_request(i, r) for i, r in enumerate(run.reqs)]
    ok = [q for q in reqs if q["info"]["error"] is None]
    bad = [q for q in reqs if q["info"]["error"] is not None]
    if run.concurrency == 1:
        strategy = {"type_": "synchronous", "worker_count": 1, "max_concurrency": 1}
    elif math.isfinite(run.rate):
        strategy = {"type_": "constant", "rate": run.rate, "max_concurrency": None}
    else:
        strategy = {"type_": "throughput", "max_concurrency": None}
    dur = run.duration
    lat = [q["request_latency"] for q in ok]

    def dist(field: str, weight: Any = None) -> dict[str, Any]:
        pairs = [(q[field] or 0.0, 1.0 if weight is None else weight(q)) for q in ok]
        return {"successful": _weighted(pairs)}

    metrics = {
        "request_totals": {
            "successful": len(ok),
            "errored": len(bad),
            "incomplete": 0,
            "total": len(reqs),
        },
        "requests_per_second": {"successful": {"mean": len(ok) / dur}},
        "request_concurrency": {"successful": {"mean": sum(lat) / dur, "max": float(_peak(run))}},
        "time_to_first_token_ms": dist("time_to_first_token_ms"),
        "inter_token_latency_ms": dist(
            "inter_token_latency_ms", lambda q: float((q["output_tokens"] or 1) - 1)
        ),
        "time_per_output_token_ms": dist(
            "time_per_output_token_ms", lambda q: float(q["output_tokens"] or 0)
        ),
        "request_latency": dist("request_latency"),
    }
    bench = {
        "type_": "generative_benchmark",
        "config": {
            "strategy": strategy,
            "sample_size": None,
            "warmup": {"percent": None, "value": None, "mode": "prefer_duration"},
        },
        "metrics": metrics,
        "requests": {"successful": ok, "errored": bad, "incomplete": []},
        "start_time": T0,
        "end_time": T0 + dur,
        "duration": dur,
        "warmup_duration": 0.0,
    }
    return {"metadata": {"version": 2, "guidellm_version": "0.8.1"}, "benchmarks": [bench]}


# -------------------------------------------------------------------------------- AIPerf

_QS = (1, 5, 10, 25, 50, 75, 90, 95, 99)


def _aiperf_stat(xs: list[float], unit: str) -> dict[str, Any]:
    """AIPerf's metric_result_from_array: sorted, linear at q/100 x (n-1)."""
    s = sorted(xs)
    n = len(s)
    out: dict[str, Any] = {"unit": unit, "avg": sum(s) / n}
    for q in _QS:
        idx = q / 100 * (n - 1)
        lo = int(idx)
        hi = min(lo + 1, n - 1)
        out[f"p{q}"] = s[lo] + (idx - lo) * (s[hi] - s[lo])
    out |= {"min": s[0], "max": s[-1], "std": float(np.std(s)), "count": n, "sum": sum(s)}
    return out


def aiperf_records(run: Run) -> list[dict[str, Any]]:
    """``profile_export.jsonl``: one record per request."""
    out = []
    for i, r in enumerate(run.reqs):
        md = {
            "x_request_id": f"x-{i:04d}",
            "request_start_ns": int((T0 + r.start) * 1e9),
            "request_end_ns": int((T0 + r.end) * 1e9),
            "benchmark_phase": "profiling",
            "phase_name": "profiling",
            "was_cancelled": False,
        }
        if r.error:
            out.append(
                {
                    "metadata": md,
                    "metrics": {},
                    "error": {"code": 502, "type": "Error", "message": r.error},
                }
            )
            continue
        m = {
            "time_to_first_token": {"value": r.ttft * 1e3, "unit": "ms"},
            "request_latency": {"value": r.latency * 1e3, "unit": "ms"},
            "inter_chunk_latency": {"value": [g * 1e3 for g in r.gaps], "unit": "ms"},
            "output_sequence_length": {"value": r.output_len, "unit": "tokens"},
            "input_sequence_length": {"value": r.input_len, "unit": "tokens"},
        }
        if r.output_len > 1:
            itl = (r.latency - r.ttft) * 1e3 / (r.output_len - 1)
            m["inter_token_latency"] = {"value": itl, "unit": "ms"}
        out.append({"metadata": md, "metrics": m, "error": None})
    return out


def aiperf_export(run: Run) -> dict[str, Any]:
    """``profile_export_aiperf.json``: the summary of the same run."""
    ok = run.ok
    failed = len(run.reqs) - len(ok)
    gaps = [g * 1e3 for r in ok for g in r.gaps]
    dur = run.duration
    if run.concurrency == 1:
        phase = {
            "name": "profiling",
            "kind": "profiling",
            "type": "concurrency",
            "requests": len(run.reqs),
            "concurrency": 1,
        }
    elif math.isfinite(run.rate):
        phase = {
            "name": "profiling",
            "kind": "profiling",
            "type": "poisson",
            "requests": len(run.reqs),
            "rate": run.rate,
        }
    else:
        phase = {
            "name": "profiling",
            "kind": "profiling",
            "type": "concurrency",
            "requests": len(run.reqs),
            "concurrency": len(run.reqs),
        }
    ex: dict[str, Any] = {
        "schema_version": "1.4",
        "aiperf_version": "0.13.0",
        "benchmark_id": "t",
        "request_throughput": {"unit": "requests/sec", "avg": len(ok) / (dur + 0.004)},
        "request_latency": _aiperf_stat([r.latency * 1e3 for r in ok], "ms"),
        "request_count": {"unit": "requests", "avg": float(len(ok))},
        "time_to_first_token": _aiperf_stat([r.ttft * 1e3 for r in ok], "ms"),
        "inter_token_latency": _aiperf_stat(
            [(r.latency - r.ttft) * 1e3 / (r.output_len - 1) for r in ok if r.output_len > 1], "ms"
        ),
        "inter_chunk_latency": _aiperf_stat(gaps, "ms"),  # (AIPerf: t-digest percentiles)
        "benchmark_duration": {"unit": "sec", "avg": dur},
        "effective_concurrency": {"unit": "requests", "max": float(_peak(run))},
        "input_config": {"phases": [phase]},
        "was_cancelled": False,
        "is_complete": True,
        "error_summary": [
            {"error_details": {"code": 502, "message": "Server disconnected"}, "count": failed}
        ]
        if failed
        else [],
        "request_error_rate": {"unit": "%", "avg": failed / len(run.reqs) * 100},
    }
    if failed:
        ex["error_request_count"] = {"unit": "requests", "avg": float(failed)}
    return ex
