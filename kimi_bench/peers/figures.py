"""Every figure a peer's file states (and each request it records, ``PeerRow``), beside
the same figure recomputed from its per-request rows by **the tool's own method**, and the
checks that refuse a file that disagrees with itself (exit 2, naming both figures).

Methods, as each tool computes its summary (read from its source):

- ``numpy``: sglang.bench_serving 0.5.23 and vllm bench serve 0.33.0: ``np.mean``,
  ``np.median`` and ``np.percentile`` (linear interpolation between closest ranks) over the
  successful requests; ITL over every gap of every successful request, pooled.
- ``aiperf``: AIPerf 0.13 scalar per-request metrics: the mean, and linear interpolation at
  ``q/100 * (n-1)`` (numpy's method, written out); ``inter_chunk_latency`` (a list per
  request) takes its percentiles from a t-digest (approximate: its mean is exact and
  checked, its percentiles are shown, not recomputed).
- ``guidellm``: GuideLLM 0.8.1: a weighted distribution (weight 1 per request for TTFT and
  latency, output tokens - 1 for ITL, output tokens for TPOT); a percentile is the first
  value whose cumulative probability reaches ``q`` (``np.searchsorted(cdf, q, "left")``),
  the mean is weighted.

Both are computed in ``results.peer_stats`` (``numpy_stat``, ``guidellm_stat``).

A figure whose rows only bound it (sglang writes no per-request E2E: TTFT + the gaps is a
lower bound of each request's E2E, so of every E2E statistic) is checked as a bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from kimi_bench.peers.errors import PeerFormatError
from kimi_bench.results.peer_stats import numpy_stat

# the tools write full float64 figures: beyond this, the figure was edited (only the order
# of a floating-point sum may differ between the tool's arithmetic and ours)
REL_TOL = 1e-6
ABS_TOL = 1e-6
STATS = ("mean", "median", "p90", "p95", "p99")
METRICS = ("ttft", "itl", "tpot", "e2e")


class PeerRow(BaseModel):
    """One request as a peer's file records it; the fields its reader set (and only those)
    are the imported report's request row (``columns``)."""

    rid: int  # its place in the file
    request_id: Any = None  # the tool's own identity (AIPerf, GuideLLM), as written
    error: str | None = None
    ttft_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_ms: list[float] | None = None
    input_tokens: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None

    def columns(self) -> dict[str, object]:
        return self.model_dump(exclude_unset=True)


@dataclass
class Figure:
    """One figure a tool states (``key``: the tool's own field) and what its rows give."""

    key: str  # the tool's field, e.g. ``p99_e2el_ms``
    metric: str  # ttft, itl, tpot, e2e (ms); req_per_s, output_tokens_per_s, ...
    stat: str  # mean, median, p90, p95, p99, or "value"
    stated: float | None
    rows: float | None = None  # recomputed from the rows by the tool's method
    method: str = ""
    unit: str = "ms"
    bound: str = "equal"  # "equal", or "at_least": the rows give a lower bound

    def as_dict(self) -> dict[str, object]:
        return {
            "key": self.key,
            "metric": self.metric,
            "stat": self.stat,
            "stated": self.stated,
            "rows": self.rows,
            "method": self.method,
            "unit": self.unit,
            "bound": self.bound,
        }


def close(a: float, b: float, rel: float = REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=ABS_TOL)


# ---------------------------------------------------------------------------------- methods


def peak_in_flight(spans: Sequence[tuple[float, float]]) -> int:
    """The most requests in flight at once, from (start, end) times (an end at the same
    instant as a start frees its slot first)."""
    events = sorted(
        [(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1])
    )
    peak = cur = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def bucket_peak(spans: Sequence[tuple[float, float]]) -> int:
    """sglang's and vLLM's "Peak concurrent requests": requests active in each whole
    second from the first start (a request counts in every second it touches)."""
    if not spans:
        return 0
    t0 = min(s for s, _ in spans)
    n = math.ceil(max(e for _, e in spans) - t0) + 1
    counts = [0] * n
    for s, e in spans:
        for sec in range(int(s - t0), min(int(e - t0) + 1, n)):
            counts[sec] += 1
    return max(counts)


# ----------------------------------------------------------------------------------- checks


def _refuse(fig: Figure, where: str, file: str) -> None:
    assert fig.stated is not None and fig.rows is not None
    unit = f" {fig.unit}" if fig.unit else ""
    how = f" ({fig.method})" if fig.method else ""
    if fig.bound == "at_least":
        raise PeerFormatError(
            f"{where}: {fig.key}: {file}'s own summary says {fig.stated:.6g}{unit} but its "
            f"per-request rows show at least {fig.rows:.6g}{unit}{how}: the file disagrees "
            "with itself (an edited file?)"
        )
    raise PeerFormatError(
        f"{where}: {fig.key}: {file}'s own summary says {fig.stated:.6g}{unit} but its "
        f"per-request rows give {fig.rows:.6g}{unit}{how}: the file disagrees with itself "
        "(an edited file?)"
    )


def check_figures(figs: Sequence[Figure], where: str, file: str, rel: float = REL_TOL) -> None:
    """Each stated figure against its rows (the figures the rows give exactly first, then
    those they bound), then the stated figures against each other."""
    for fig in sorted(figs, key=lambda f: f.bound != "equal"):
        if fig.stated is None or fig.rows is None:
            continue
        if fig.bound == "at_least":
            if fig.stated < fig.rows and not close(fig.stated, fig.rows, 1e-4):
                _refuse(fig, where, file)
        elif not close(fig.stated, fig.rows, rel):
            _refuse(fig, where, file)
    check_order(figs, where, file)


def check_order(figs: Sequence[Figure], where: str, file: str) -> None:
    """Percentiles ordered (median <= p90 <= p95 <= p99) within each metric, and each
    E2E statistic at least the same TTFT statistic (a request ends after its first token)."""
    by = {(f.metric, f.stat): f for f in figs if f.stated is not None}
    for metric in METRICS:
        chain = [by[(metric, s)] for s in ("median", "p90", "p95", "p99") if (metric, s) in by]
        for lo, hi in itertools.pairwise(chain):
            assert lo.stated is not None and hi.stated is not None
            if lo.stated > hi.stated and not close(lo.stated, hi.stated):
                raise PeerFormatError(
                    f"{where}: {lo.key} {lo.stated:.6g} ms is above {hi.key} "
                    f"{hi.stated:.6g} ms in {file}: percentiles cannot fall as they rise "
                    "(an edited file?)"
                )
    for stat in STATS:
        e2e, ttft = by.get(("e2e", stat)), by.get(("ttft", stat))
        if not (e2e and ttft and e2e.stated is not None and ttft.stated is not None):
            continue
        if e2e.stated < ttft.stated and not close(e2e.stated, ttft.stated):
            raise PeerFormatError(
                f"{where}: {e2e.key} {e2e.stated:.6g} ms is below {ttft.key} "
                f"{ttft.stated:.6g} ms in {file}: a request ends after its first token "
                "(E2E >= TTFT; an edited file or a unit mislabelled?)"
            )


def check_rows_physical(
    rows: Sequence[PeerRow], duration_s: float | None, where: str, file: str
) -> None:
    """Each served row: E2E >= TTFT (+ its gaps, when it has them) and E2E within the
    benchmark's duration (a request cannot outlast the run that measured it)."""
    for r in rows:
        e2e, ttft = r.e2e_ms, r.ttft_ms
        if r.error is not None or e2e is None or ttft is None:
            continue
        floor = ttft + sum(r.itl_ms or [])
        if e2e < floor and not close(e2e, floor, 1e-4):
            raise PeerFormatError(
                f"{where}: request {r.rid!r} in {file}: E2E {e2e:.6g} ms is below its "
                f"TTFT plus its gaps ({floor:.6g} ms): a request ends after its last token "
                "(an edited file or a unit mislabelled?)"
            )
        if duration_s is not None and e2e > duration_s * 1e3 * 1.01 + 1.0:
            raise PeerFormatError(
                f"{where}: request {r.rid!r} in {file}: E2E {e2e:.6g} ms is longer "
                f"than the whole benchmark ({duration_s:.6g} s): no request outlasts the run "
                "that measured it (E2E in the wrong unit, or the duration edited?)"
            )


def latency_figures(
    keys: dict[tuple[str, str], str],
    stated: dict[str, float | None],
    rows: dict[str, list[float]],
    method: str,
) -> list[Figure]:
    """Figures ``(metric, stat) -> tool key`` with their rows recomputed by numpy."""
    out = []
    for (metric, stat), key in keys.items():
        xs = rows.get(metric)
        out.append(
            Figure(key, metric, stat, stated.get(key), numpy_stat(xs, stat) if xs else None, method)
        )
    return out
