"""serve-ab's figures of the client side, from one run's request rows: how late the
client's sends left (``send_lateness``) and, for streams that open with a chunk carrying
no text, the medians of that chunk's and of the first text's time (``stream_openings``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kimi_bench.infra.stats import percentile


@dataclass(frozen=True)
class Lateness:
    """The send lateness (ms, actual send minus scheduled) of one (rate, arm): p50, p99,
    max (None: no send recorded)."""

    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None


def send_lateness(late: Sequence[float]) -> Lateness:
    if not late:
        return Lateness(None, None, None)
    return Lateness(percentile(late, 50), percentile(late, 99), max(late))


def stream_openings(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(first chunk, first text) ms of each stream -> the median of each."""
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
