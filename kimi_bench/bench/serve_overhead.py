"""What the load generator added: per rate and arm, the client's mean TTFT minus the
server's own (the mean of its ``/metrics`` TTFT histogram over the same trace window) as
"client overhead", and how late the client's sends left (actual send minus scheduled).

The server's TTFT starts when it has the request's head and ends when its first token is
ready; the client's starts before its send and ends when the first token chunk is parsed.
The difference is connecting and writing, the server's HTTP layer both ways and the
client's event loop: what a benchmark's client must keep small. Only servers that export a
TTFT histogram can be compared (``TTFT_HISTOGRAMS``); others get a note instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.results.serve_client import send_lateness

# kimi-bench serve, SGLang (--enable-metrics), vLLM
TTFT_HISTOGRAMS = (
    "kimi_bench_time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
    "vllm:time_to_first_token_seconds",
)
LATENESS_WARN_MS = 5.0  # send lateness p99 above this: the client could not keep time


def server_ttft(run: ServeRun) -> tuple[str, float, float] | None:
    """(histogram, sum in s, count) the server's TTFT histogram gained during the run's
    trace (all label sets summed); None when /metrics had none."""
    hists = run.server_metrics["histograms"] if run.server_metrics else {}
    for name in TTFT_HISTOGRAMS:
        series = [h for key, h in hists.items() if key == name or key.startswith(name + "{")]
        if series:
            return name, sum(h["sum"] for h in series), sum(h["count"] for h in series)
    return None


@dataclass
class Overhead:
    """One (rate, arm) of an HTTP run: the client's mean TTFT against the server's (its
    fields None without a TTFT histogram) and how late the sends left."""

    rate: str
    arm: str
    requests: int
    client_ttft_mean_ms: float | None
    send_lateness_p50_ms: float | None
    send_lateness_p99_ms: float | None
    send_lateness_max_ms: float | None
    server_ttft_mean_ms: float | None = None
    server_requests: int | None = None
    server_metric: str | None = None
    client_overhead_ms: float | None = None
    client_overhead_pct: float | None = None

    def as_row(self) -> dict[str, object]:
        """``data.client_overhead``'s row (the report's layout)."""
        return asdict(self)


def _group(label: str, arm: str, runs: Sequence[ServeRun]) -> Overhead:
    ttfts = [r.ttft_ms for run in runs for r in run.records if r.ok and r.ttft_ms is not None]
    late = [r.client.lateness_ms for run in runs for r in run.records
            if r.client is not None and r.client.lateness_ms is not None]  # fmt: skip
    lateness = send_lateness(late)
    row = Overhead(
        rate=label, arm=arm, requests=len(ttfts),
        client_ttft_mean_ms=sum(ttfts) / len(ttfts) if ttfts else None,
        send_lateness_p50_ms=lateness.p50_ms,
        send_lateness_p99_ms=lateness.p99_ms,
        send_lateness_max_ms=lateness.max_ms,
    )  # fmt: skip
    server = [server_ttft(run) for run in runs]
    if row.client_ttft_mean_ms is not None and all(server):
        total = sum(s[1] for s in server if s)
        count = sum(s[2] for s in server if s)
        if count > 0:
            mean_ms = total / count * 1e3
            row.server_ttft_mean_ms, row.server_requests = mean_ms, int(count)
            row.server_metric = next(s[0] for s in server if s)
            row.client_overhead_ms = row.client_ttft_mean_ms - mean_ms
            row.client_overhead_pct = row.client_overhead_ms / row.client_ttft_mean_ms * 100
    return row


def overhead_rows(runs: Sequence[ServeRun]) -> list[Overhead]:
    """One row per (rate, arm) of the HTTP runs, in run order."""
    groups: dict[tuple[str, str], list[ServeRun]] = {}
    for run in runs:
        if run.http:
            groups.setdefault((run.rate_label, run.arm), []).append(run)
    return [_group(label, arm, rs) for (label, arm), rs in groups.items()]


def overhead_notes(rows: Sequence[Overhead], runs: Sequence[ServeRun]) -> list[str]:
    """What the overhead rows say, and why an arm has none."""
    notes = []
    shown = [r for r in rows if r.client_overhead_ms is not None]
    if shown:
        parts = "; ".join(
            f"{r.rate} {r.arm}: {r.client_overhead_ms:+.1f} ms "
            f"({r.client_overhead_pct or 0:+.1f}% of TTFT)"
            for r in shown
            if r.client_overhead_ms is not None
        )
        notes.append(
            "client overhead = client mean TTFT - the server's mean TTFT from its /metrics "
            f"histogram ({shown[0].server_metric}), same trace window: {parts}."
        )
        for r in shown:
            if r.server_requests != r.requests:
                notes.append(
                    f"client overhead at {r.rate}, {r.arm}: the server counted "
                    f"{r.server_requests} first tokens, the client {r.requests} "
                    "completed requests; the two means cover different requests."
                )
    missing = sorted({r.arm for r in rows if r.client_overhead_ms is None})
    if missing:
        why = {run.arm: run.server_metrics_error for run in runs if run.http}
        reasons = [f"{a} ({why[a]})" if why.get(a) else a for a in missing]
        notes.append(
            "client overhead not measured for " + ", ".join(reasons) + ": no TTFT histogram "
            f"in /metrics (known: {', '.join(TTFT_HISTOGRAMS)})."
        )
    return notes


def lateness_warnings(rows: Sequence[Overhead]) -> list[str]:
    """One warning per (rate, arm) whose sends were late by more than 5 ms at p99."""
    return [
        f"WARNING: send lateness p99 {r.send_lateness_p99_ms:.1f} ms > "
        f"{LATENESS_WARN_MS:g} ms at {r.rate}, {r.arm} (max "
        f"{r.send_lateness_max_ms or 0:.1f} ms): the load generator did not send on time (a "
        "busy host?); the arrival pattern and TTFTs of this arm include that."
        for r in rows
        if r.send_lateness_p99_ms is not None and r.send_lateness_p99_ms > LATENESS_WARN_MS
    ]
