"""GuideLLM 0.8.1's JSON report (``guidellm run ... --output kind=json,path=X.json``).

``benchmarks[]``, each with ``requests.successful / errored / incomplete`` (one record per
request, named by ``request_id``: its TTFT, latency, token counts and GuideLLM's own
per-request ITL and TPOT), ``metrics`` (the tool's summary of the same requests) and
``duration``; the version is ``metadata.guidellm_version``. Several benchmarks of one
strategy are repeats; a sweep over strategies is refused.

GuideLLM's definitions (kept as the tool's figures, each beside what its rows give by its
own weighted method, ``results.peer_stats.guidellm_stat``): ITL = (last token - first token) /
(output tokens - 1), weighted by output tokens - 1; its TPOT = (last token - request
start) / output tokens (the first token included), weighted by output tokens. The rows
also get kimi-bench's own TPOT, (E2E - TTFT) / (output tokens - 1), as a measured run has.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeFloat, NonNegativeInt, ValidationError

from kimi_bench.peers.base import (
    PeerFormatError,
    PeerRun,
    Repeat,
    Stated,
    _Loose,
    field_error,
    once_each,
)
from kimi_bench.peers.figures import (
    Figure,
    PeerRow,
    check_figures,
    check_rows_physical,
    peak_in_flight,
)
from kimi_bench.peers.load import Load
from kimi_bench.results.peer_stats import guidellm_stat

METHOD = "GuideLLM's weighted distribution (first value reaching q)"
# GuideLLM's metric -> (kimi-bench's metric, the per-request field, its weight, to ms)
_METRICS = {
    "time_to_first_token_ms": ("ttft", "time_to_first_token_ms", None, 1.0),
    "inter_token_latency_ms": ("itl", "inter_token_latency_ms", -1, 1.0),
    "time_per_output_token_ms": ("tpot", "time_per_output_token_ms", 0, 1.0),
    "request_latency": ("e2e", "request_latency", None, 1e3),
}


def is_guidellm(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("benchmarks"), list) and "guidellm_version" in str(
        obj.get("metadata")
    )


class _GlInfo(_Loose):
    error: str | None = None
    request_id: str | None = None


class _GlRequest(_Loose):
    info: _GlInfo = _GlInfo()
    request_id: str | None = None
    time_to_first_token_ms: NonNegativeFloat | None = None
    prompt_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    inter_token_latency_ms: NonNegativeFloat | None = None
    time_per_output_token_ms: NonNegativeFloat | None = None
    request_latency: NonNegativeFloat | None = None
    request_start_time: float | None = None
    request_end_time: float | None = None


class _GlRequests(_Loose):
    successful: list[_GlRequest]
    errored: list[_GlRequest] = Field(default_factory=list)
    incomplete: list[_GlRequest] = Field(default_factory=list)


class _GlStrategy(_Loose):
    type_: str
    rate: NonNegativeFloat | None = None
    streams: NonNegativeInt | None = None
    max_concurrency: NonNegativeInt | None = None


class _GlConfig(_Loose):
    strategy: _GlStrategy
    warmup: dict[str, Any] | None = None
    sample_size: int | None = None


class _GlBenchmark(_Loose):
    config: _GlConfig
    requests: _GlRequests
    duration: NonNegativeFloat
    warmup_duration: NonNegativeFloat | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)


class _GlMeta(_Loose):
    guidellm_version: str


class GuidellmReport(_Loose):
    metadata: _GlMeta
    benchmarks: list[_GlBenchmark]


def _warmup(b: _GlBenchmark) -> str | None:
    w = b.config.warmup
    if w is None:
        return None
    given = w.get("value") if w.get("value") is not None else w.get("percent")
    if given is None and not b.warmup_duration:
        return "none"
    return f"{given} ({w.get('mode')}), {b.warmup_duration or 0:g} s"


_CAPPED = ("constant", "poisson", "throughput")  # strategies whose cap is max_concurrency


def _load(b: _GlBenchmark) -> Load:
    """GuideLLM's strategy as a load: synchronous is one request in flight (``c1``),
    concurrent N streams ``cN``, constant/poisson a rate, throughput a burst."""
    s, warm = b.config.strategy, _warmup(b)
    unrecorded = frozenset() if warm is not None else frozenset({"warmup"})
    if s.type_ in _CAPPED and "max_concurrency" not in s.model_fields_set:
        unrecorded |= {"max_concurrency"}  # GuideLLM writes it, null for no limit
    if s.type_ in ("constant", "poisson"):
        burst = 1.0 if s.type_ == "poisson" else math.inf
        if not s.rate:  # a paced strategy without its rate: not recorded, never guessed
            return Load(None, s.max_concurrency, burst, warm, unrecorded | {"request_rate"})
        return Load(float(s.rate), s.max_concurrency, burst, warm, unrecorded)
    if s.type_ == "synchronous":
        return Load(math.inf, 1, None, warm, unrecorded)
    if s.type_ == "concurrent" and s.streams:
        return Load(math.inf, s.streams, None, warm, unrecorded)
    if s.type_ == "throughput":
        return Load(math.inf, s.max_concurrency, None, warm, unrecorded)
    raise PeerFormatError(f"GuideLLM strategy {s.type_!r} is not one kimi-bench can label")


def _row(rid: int, r: _GlRequest, error: str | None) -> PeerRow:
    ok = error is None and r.time_to_first_token_ms is not None
    e2e = r.request_latency * 1e3 if ok and r.request_latency is not None else None
    ttft, n = r.time_to_first_token_ms if ok else None, r.output_tokens
    row = PeerRow(
        rid=rid,
        request_id=r.request_id or r.info.request_id,
        error=None if ok else (error or "no first token"),
        ttft_ms=ttft,
        itl_mean_ms=r.inter_token_latency_ms if ok else None,
        input_tokens=r.prompt_tokens,
        prompt_tokens=r.prompt_tokens,
        output_tokens=n,
        e2e_ms=e2e,
    )
    if e2e is not None and ttft is not None and n is not None and n > 1:
        row.tpot_ms = (e2e - ttft) / (n - 1)
    return row


def _stat(summary: Any, stat: str) -> float | None:
    if not isinstance(summary, dict):
        return None
    v = (
        summary.get(stat)
        if stat in ("mean", "median")
        else (summary.get("percentiles") or {}).get(stat)
    )
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _figures(b: _GlBenchmark, ok: list[_GlRequest]) -> list[Figure]:
    """Each latency statistic GuideLLM states for its successful requests, beside the
    same statistic of their records by GuideLLM's weighted method."""
    out = []
    for name, (metric, attr, weight, scale) in _METRICS.items():
        summary = (b.metrics.get(name) or {}).get("successful")
        pairs = [(getattr(r, attr), r.output_tokens) for r in ok if getattr(r, attr) is not None]
        values = [v * scale for v, _ in pairs]
        weights = [
            1.0 if weight is None else float((n or (1 if weight else 0)) + weight) for _, n in pairs
        ]
        for stat in ("mean", "median", "p90", "p95", "p99"):
            stated = _stat(summary, stat)
            out.append(
                Figure(
                    f"metrics.{name}.successful.{stat}",
                    metric,
                    stat,
                    None if stated is None else stated * scale,
                    guidellm_stat(values, weights, stat),
                    METHOD,
                )
            )
    return out


def _counts(b: _GlBenchmark, served: int, where: str) -> list[Figure]:
    totals = b.metrics.get("request_totals") or {}
    rq = b.requests
    out = []
    for key, n in (
        ("successful", served),
        ("errored", len(rq.errored)),
        ("incomplete", len(rq.incomplete)),
        ("total", len(rq.successful) + len(rq.errored) + len(rq.incomplete)),
    ):
        v = totals.get(key)
        if isinstance(v, (int, float)):
            out.append(
                Figure(
                    f"metrics.request_totals.{key}",
                    key,
                    "value",
                    float(v),
                    float(n),
                    "the request records",
                    "requests",
                )
            )
    rps = _stat((b.metrics.get("requests_per_second") or {}).get("successful"), "mean")
    if b.duration > 0:
        out.append(
            Figure(
                "metrics.requests_per_second.successful.mean",
                "req_per_s",
                "value",
                rps,
                served / b.duration,
                "successful / duration",
                "req/s",
            )
        )
    goodput = _stat((b.metrics.get("request_goodput") or {}).get("successful"), "mean")
    if goodput is not None:  # GuideLLM's SLOs live in its config: carried, not recomputed
        out.append(
            Figure(
                "metrics.request_goodput.successful.mean",
                "goodput_req_per_s",
                "value",
                goodput,
                None,
                "the tool's SLOs; not recomputed",
                "req/s",
            )
        )
    if b.config.sample_size is not None and len(rq.successful) != served:
        raise PeerFormatError(f"{where}: sampled request records: not every request is in it")
    return out


def _concurrency(
    b: _GlBenchmark, rows_src: list[_GlRequest], load: Load, where: str, file: str
) -> None:
    limit = load.max_concurrency
    if limit is None:
        return
    spans = [
        (r.request_start_time, r.request_end_time)
        for r in rows_src
        if r.request_start_time is not None and r.request_end_time is not None
    ]
    peak = peak_in_flight(spans)
    stated = _stat((b.metrics.get("request_concurrency") or {}).get("successful"), "mean")
    top = ((b.metrics.get("request_concurrency") or {}).get("successful") or {}).get("max")
    shows = None
    if peak > limit:
        shows = f"{peak} requests in flight at once (its own request start and end times)"
    elif isinstance(top, (int, float)) and top > limit:
        shows = f"a peak of {top:g} requests in flight (metrics.request_concurrency)"
    elif stated is not None and stated > limit * 1.01:
        shows = f"a mean of {stated:.3g} requests in flight (metrics.request_concurrency)"
    if shows:
        raise PeerFormatError(
            f"{where}: {file} says strategy {b.config.strategy.type_} (at most {limit} in "
            f"flight) but shows {shows}: the load it states is contradicted by its own "
            "figures (refused, not relabelled)"
        )


def _repeat(b: _GlBenchmark, load: Load, where: str, file: str) -> Repeat:
    rq = b.requests
    every = [*rq.successful, *rq.errored, *rq.incomplete]
    rows = [_row(i, r, r.info.error) for i, r in enumerate(rq.successful)]
    rows += [_row(len(rows) + i, r, r.info.error or "errored") for i, r in enumerate(rq.errored)]
    rows += [
        _row(len(rows) + i, r, "incomplete (cut off at the benchmark's end)")
        for i, r in enumerate(rq.incomplete)
    ]
    seen: dict[str, int] = {}
    for row in rows:
        rid = row.request_id
        if rid is not None and rid in seen:
            raise PeerFormatError(
                f"{where}: request_id {rid} appears twice (records {seen[rid]} and "
                f"{row.rid}): each request is recorded once; a duplicate would count twice"
            )
        seen[rid] = row.rid
    ok = [r for r, row in zip(every, rows, strict=True) if row.error is None]
    figs = _figures(b, ok) + _counts(b, len(ok), where)
    check_figures(figs, where, file)
    check_rows_physical(rows, b.duration, where, file)
    _concurrency(b, every, load, where, file)
    by = {(f.metric, f.stat): f.stated for f in figs}
    stated = Stated.of(figs, by.get(("req_per_s", "value")), by.get(("successful", "value")), False)
    return Repeat(rows, len(ok), len(rows) - len(ok), b.duration, stated, figs)


def read_guidellm(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    if len(objs) != 1:
        raise PeerFormatError(f"{path}: a GuideLLM report is one JSON object")
    try:
        rep = GuidellmReport.model_validate(objs[0])
    except ValidationError as exc:
        raise field_error(exc, f"{path} (GuideLLM report)") from None
    if not rep.benchmarks:
        raise PeerFormatError(f"{path}: field benchmarks: empty, no benchmark to import")
    once_each(objs[0]["benchmarks"], str(path), "GuideLLM benchmark")
    loads = [_load(b) for b in rep.benchmarks]
    if len({x.meaning() for x in loads}) > 1:
        raise PeerFormatError(
            f"{path}: benchmarks of several strategies "
            f"({', '.join(sorted({x.label for x in loads}))}): run GuideLLM with one profile per "
            "file to import it"
        )
    repeats = [
        _repeat(b, load, f"{path} (GuideLLM benchmark {k + 1})", path.name)
        for k, (b, load) in enumerate(zip(rep.benchmarks, loads, strict=True))
    ]
    strat = rep.benchmarks[0].config.strategy
    return PeerRun(
        "guidellm",
        rep.metadata.guidellm_version,
        "guidellm",
        path,
        loads[0],
        repeats,
        {"strategy": strat.type_},
    )
