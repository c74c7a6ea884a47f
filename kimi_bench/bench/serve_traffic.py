"""What serve-ab's report says of its traffic (issue 43): the workload's summary and source,
the breakdowns by image-size bucket and by images per request (``serve_breakdown``), and
on every per-rate row the offered rate beside the achieved one and the requests that
stopped early; notes say in words which rates saturated an arm, how many requests stopped
before their max tokens, and where decisions were mixed within a request."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.bench.serve_types import RequestRow
from kimi_bench.options import ServeOptions
from kimi_bench.results.serve_breakdown import by_count, by_size, keep_up_of_rows, stopped_early
from kimi_bench.serving.workload import Workload, summarize

SATURATED = 0.9  # first tokens slower than this share of the arrivals' pace: saturated


def traffic_data(requests: Sequence[RequestRow], workload: Workload | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if workload is not None:
        out["workload"] = summarize(workload)
    sizes, counts = by_size(requests), by_count(requests)
    if sizes:
        out["by_size"] = sizes
    if counts:
        out["by_images_per_request"] = counts
    return out


def annotate_rows(rows: list[dict[str, Any]], opts: ServeOptions,
                  requests: Sequence[RequestRow]) -> None:  # fmt: skip
    """Each per-rate row gets its offered rate (None: unlimited) and its early stops."""
    offered = {f"{r:g}" if math.isfinite(r) else "inf": r for r in opts.rates}
    early = stopped_early(requests)
    kept = keep_up_of_rows(requests)
    for row in rows:
        row["keep_up"] = kept.get((str(row["rate"]), str(row["arm"])))
        rate = offered.get(str(row["rate"]))
        row["offered_req_per_s"] = rate if rate is not None and math.isfinite(rate) else None
        row["stopped_early"] = early.get((str(row["rate"]), str(row["arm"])), 0)


def saturation_line(row: dict[str, Any]) -> str | None:
    """Saturation in words: first tokens came out slower than the requests came in."""
    keep, achieved = row.get("keep_up"), row.get("req_per_s")
    if keep is None or keep >= SATURATED:
        return None
    offered = row.get("offered_req_per_s")
    rates = f" (achieved {achieved:.2f} req/s, {offered:g} offered)" if offered else ""
    return (f"{row['arm']} at rate {row['rate']}: saturated: its first tokens came out at "
            f"{keep:.0%} of the pace its requests arrived{rates}; requests queued, so its "
            "TTFT there measures the queue")  # fmt: skip


def traffic_notes(
    opts: ServeOptions, rows: list[dict[str, Any]], data: dict[str, Any]
) -> list[str]:
    notes = [line for row in rows if (line := saturation_line(row))]
    for row in rows:
        n = row.get("stopped_early") or 0
        if n:
            notes.append(
                f"{row['arm']} at rate {row['rate']}: {n} of {row.get('completed')} completed "
                "requests stopped early (usage reports fewer completion tokens than their max "
                "tokens; --ignore-eos asks servers not to)"
            )
    mixed = [r for r in data.get("by_images_per_request", []) if r.get("mixed_requests")]
    for r in mixed:
        notes.append(f"{r['arm']} at rate {r['rate']}: {r['mixed_requests']} of {r['requests']} "
                     f"requests of {r['images_per_request']} images had mixed deferral "
                     f"decisions ({opts.runtime} decides per image)")  # fmt: skip
    work = data.get("workload")
    if work:
        src = work["source"]
        where = src.get("path") or src.get("sizes") or ""
        notes.append(
            f"workload: {work['requests']} requests, {work['images']} images "
            f"({work['distinct_images']} distinct, {work['repeated_images']} repeats), "
            f"from {src.get('kind')} {where}".rstrip()
        )
    return notes


def cache_flush_notes(runs: Sequence[ServeRun], endpoints: bool) -> list[str]:
    """What each arm's server answered to ``/flush_cache`` before its measured traces, in
    one line per arm; for endpoints never flushed, that their caches carried over."""
    out: list[str] = []
    for arm, source in {r.arm: r.source or {} for r in runs}.items():
        answers = Counter(source.get("cache_flushes") or ())
        if answers:
            said = ", ".join(f"{a} x{n}" for a, n in answers.items())
            out.append(f"{arm}: server caches flushed (/flush_cache) after the warm-up, "
                       f"before each measured trace ({said})")  # fmt: skip
        elif endpoints:
            out.append(f"{arm}: server caches not flushed between traces: a repeated image "
                       "may hit a cache filled by an earlier rate or the warm-up "
                       "(--flush-cache asks SGLang servers to empty them)")  # fmt: skip
    return out
