"""What the load generator added: per rate and arm, the client's mean TTFT minus the
server's own (the mean of its ``/metrics`` TTFT histogram over the same trace window) as
"client overhead", and how late the client's sends left (actual send minus scheduled).

The server's TTFT starts when it has the request's head and ends when its first token is
ready; the client's starts before its send and ends when the first token chunk is parsed.
The difference is connecting and writing, the server's HTTP layer both ways and the
client's event loop: what a benchmark's client must keep small. Only servers that export a
TTFT histogram can be compared (``TTFT_HISTOGRAMS``); others get a note instead."""

from __future__ import annotations

from typing import Any

from kimi_bench.infra.stats import percentile

# kimi-bench serve, SGLang (--enable-metrics), vLLM
TTFT_HISTOGRAMS = (
    "kimi_bench_time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
    "vllm:time_to_first_token_seconds",
)
LATENESS_WARN_MS = 5.0  # send lateness p99 above this: the client could not keep time


def server_ttft(run: dict[str, Any]) -> tuple[str, float, float] | None:
    """(histogram, sum in s, count) the server's TTFT histogram gained during the run's
    trace (all label sets summed); None when /metrics had none."""
    hists = (run.get("server_metrics") or {}).get("histograms") or {}
    for name in TTFT_HISTOGRAMS:
        series = [h for key, h in hists.items() if key == name or key.startswith(name + "{")]
        if series:
            return name, sum(h["sum"] for h in series), sum(h["count"] for h in series)
    return None


def _http(run: dict[str, Any]) -> bool:
    return any("times_s" in r for r in run["records"])


def _group(label: str, arm: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    ttfts = [r["ttft_ms"] for run in runs for r in run["records"]
             if not r.get("error") and r.get("ttft_ms") is not None]  # fmt: skip
    late = [r["lateness_ms"] for run in runs for r in run["records"]
            if r.get("lateness_ms") is not None]  # fmt: skip
    row: dict[str, Any] = {
        "rate": label,
        "arm": arm,
        "requests": len(ttfts),
        "client_ttft_mean_ms": sum(ttfts) / len(ttfts) if ttfts else None,
        "server_ttft_mean_ms": None,
        "server_requests": None,
        "server_metric": None,
        "client_overhead_ms": None,
        "client_overhead_pct": None,
        "send_lateness_p50_ms": percentile(late, 50) if late else None,
        "send_lateness_p99_ms": percentile(late, 99) if late else None,
        "send_lateness_max_ms": max(late) if late else None,
    }
    server = [server_ttft(run) for run in runs]
    if ttfts and all(server):
        total = sum(s[1] for s in server if s)
        count = sum(s[2] for s in server if s)
        if count > 0:
            mean_ms = total / count * 1e3
            overhead = row["client_ttft_mean_ms"] - mean_ms
            row.update(
                server_ttft_mean_ms=mean_ms,
                server_requests=int(count),
                server_metric=next(s[0] for s in server if s),
                client_overhead_ms=overhead,
                client_overhead_pct=overhead / row["client_ttft_mean_ms"] * 100,
            )
    return row


def overhead_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (rate, arm) of the HTTP runs, in run order."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        if _http(run):
            groups.setdefault((run["rate_label"], run["arm"]), []).append(run)
    return [_group(label, arm, rs) for (label, arm), rs in groups.items()]


def overhead_notes(rows: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[str]:
    """What the overhead rows say, and why an arm has none."""
    notes = []
    shown = [r for r in rows if r["client_overhead_ms"] is not None]
    if shown:
        parts = "; ".join(
            f"{r['rate']} {r['arm']}: {r['client_overhead_ms']:+.1f} ms "
            f"({r['client_overhead_pct']:+.1f}% of TTFT)"
            for r in shown
        )
        notes.append(
            "client overhead = client mean TTFT - the server's mean TTFT from its /metrics "
            f"histogram ({shown[0]['server_metric']}), same trace window: {parts}."
        )
        for r in shown:
            if r["server_requests"] != r["requests"]:
                notes.append(
                    f"client overhead at {r['rate']}, {r['arm']}: the server counted "
                    f"{r['server_requests']} first tokens, the client {r['requests']} "
                    "completed requests; the two means cover different requests."
                )
    missing = sorted({r["arm"] for r in rows if r["client_overhead_ms"] is None})
    if missing:
        why = {run["arm"]: run.get("server_metrics_error") for run in runs if _http(run)}
        reasons = [f"{a} ({why[a]})" if why.get(a) else a for a in missing]
        notes.append(
            "client overhead not measured for " + ", ".join(reasons) + ": no TTFT histogram "
            f"in /metrics (known: {', '.join(TTFT_HISTOGRAMS)})."
        )
    return notes


def lateness_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """One warning per (rate, arm) whose sends were late by more than 5 ms at p99."""
    return [
        f"WARNING: send lateness p99 {r['send_lateness_p99_ms']:.1f} ms > "
        f"{LATENESS_WARN_MS:g} ms at {r['rate']}, {r['arm']} (max "
        f"{r['send_lateness_max_ms']:.1f} ms): the load generator did not send on time (a busy "
        "host?); the arrival pattern and TTFTs of this arm include that."
        for r in rows
        if r["send_lateness_p99_ms"] is not None and r["send_lateness_p99_ms"] > LATENESS_WARN_MS
    ]
