"""GuideLLM's JSON report and AIPerf's exports, validated with pydantic.

- GuideLLM (``guidellm run ... --output kind=json,path=X.json``): ``benchmarks[]``, each
  with ``requests.successful / errored / incomplete`` (per-request stats with
  ``time_to_first_token_ms``) and ``duration``; the version is ``metadata.guidellm_version``.
  Several benchmarks of one strategy are repeats; a sweep over strategies is refused.
- AIPerf ``profile_export_aiperf.json``: the summary export (``time_to_first_token`` p50,
  p90, p99, ``request_count``, ``benchmark_duration``): no per-request data. AIPerf's
  ``profile_export.jsonl`` (one record per request: ``metadata`` + ``metrics``) is read as
  per-request rows.

Load labels: a numeric rate where the tool ran one, ``inf`` for an unlimited burst,
``sync`` (GuideLLM synchronous), ``c<N>`` (a fixed concurrency of N) or ``unrecorded``
(AIPerf's per-request JSONL does not record the load setting).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeFloat, NonNegativeInt, ValidationError

from kimi_bench.infra.limits import read_text_bounded
from kimi_bench.peers.formats import (
    MAX_BYTES,
    PeerFormatError,
    PeerRun,
    Repeat,
    _Loose,
    field_error,
    json_objects,
)
from kimi_bench.peers.load import UNRECORDED, Load


def is_guidellm(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("benchmarks"), list) and "guidellm_version" in str(
        obj.get("metadata")
    )


def is_aiperf(obj: dict[str, Any]) -> bool:
    return "aiperf_version" in obj or ("metadata" in obj and "metrics" in obj)


# ------------------------------------------------------------------------------- GuideLLM


class _GlInfo(_Loose):
    error: str | None = None


class _GlRequest(_Loose):
    info: _GlInfo = _GlInfo()
    time_to_first_token_ms: NonNegativeFloat | None = None
    prompt_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    inter_token_latency_ms: NonNegativeFloat | None = None
    request_latency: NonNegativeFloat | None = None


class _GlRequests(_Loose):
    successful: list[_GlRequest]
    errored: list[_GlRequest] = Field(default_factory=list)
    incomplete: list[_GlRequest] = Field(default_factory=list)


class _GlStrategy(_Loose):
    type_: str
    rate: NonNegativeFloat | None = None
    streams: NonNegativeInt | None = None
    max_concurrency: NonNegativeInt | None = None


class _GlStat(_Loose):
    mean: NonNegativeFloat | None = None
    median: NonNegativeFloat | None = None
    percentiles: dict[str, NonNegativeFloat | None] = Field(default_factory=dict)


class _GlStatus(_Loose):
    successful: _GlStat = _GlStat()


class _GlTotals(_Loose):
    successful: NonNegativeInt | None = None


class _GlMetrics(_Loose):
    time_to_first_token_ms: _GlStatus = _GlStatus()
    requests_per_second: _GlStatus = _GlStatus()
    request_totals: _GlTotals = _GlTotals()


class _GlConfig(_Loose):
    strategy: _GlStrategy


class _GlBenchmark(_Loose):
    config: _GlConfig
    requests: _GlRequests
    duration: NonNegativeFloat
    metrics: _GlMetrics = _GlMetrics()


class _GlMeta(_Loose):
    guidellm_version: str


class GuidellmReport(_Loose):
    metadata: _GlMeta
    benchmarks: list[_GlBenchmark]


def _gl_load(s: _GlStrategy) -> Load:
    """GuideLLM's strategy as a load: synchronous is one request in flight (``c1``),
    concurrent N streams ``cN``, constant/poisson a rate, throughput a burst."""
    if s.type_ in ("constant", "poisson") and s.rate:
        return Load(float(s.rate), s.max_concurrency, 1.0 if s.type_ == "poisson" else None)
    if s.type_ == "synchronous":
        return Load(math.inf, 1)
    if s.type_ == "concurrent" and s.streams:
        return Load(math.inf, s.streams)
    return Load(math.inf, s.max_concurrency)


def _gl_stated(b: _GlBenchmark) -> dict[str, float | None]:
    ttft, m = b.metrics.time_to_first_token_ms.successful, b.metrics
    done = m.request_totals.successful
    return {"mean_ttft_ms": ttft.mean, "median_ttft_ms": ttft.median,
            "p90_ttft_ms": ttft.percentiles.get("p90"), "p99_ttft_ms": ttft.percentiles.get("p99"),
            "req_per_s": m.requests_per_second.successful.mean,
            "completed": None if done is None else float(done)}  # fmt: skip


def _gl_row(rid: int, r: _GlRequest, error: str | None) -> dict[str, Any]:
    ok = error is None and r.time_to_first_token_ms is not None
    return {
        "rid": rid,
        "error": None if ok else (error or "no first token"),
        "ttft_ms": r.time_to_first_token_ms if ok else None,
        "itl_mean_ms": r.inter_token_latency_ms if ok else None,
        "input_tokens": r.prompt_tokens,
        "output_tokens": r.output_tokens,
        "e2e_ms": r.request_latency * 1e3 if ok and r.request_latency is not None else None,
    }


def read_guidellm(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    if len(objs) != 1:
        raise PeerFormatError(f"{path}: a GuideLLM report is one JSON object")
    try:
        rep = GuidellmReport.model_validate(objs[0])
    except ValidationError as exc:
        raise field_error(exc, f"{path} (GuideLLM report)") from None
    if not rep.benchmarks:
        raise PeerFormatError(f"{path}: field benchmarks: empty, no benchmark to import")
    loads = {_gl_load(b.config.strategy) for b in rep.benchmarks}
    if len(loads) > 1:
        raise PeerFormatError(
            f"{path}: benchmarks of several strategies ({', '.join(sorted(x.label for x in loads))}"
            "): run GuideLLM with one profile per file to import it"
        )
    repeats = []
    for b in rep.benchmarks:
        rq = b.requests
        rows = [_gl_row(i, r, r.info.error) for i, r in enumerate(rq.successful)]
        rows += [_gl_row(len(rows) + i, r, r.info.error or "errored")
                 for i, r in enumerate(rq.errored)]  # fmt: skip
        rows += [_gl_row(len(rows) + i, r, "incomplete (cut off at the benchmark's end)")
                 for i, r in enumerate(rq.incomplete)]  # fmt: skip
        served = sum(1 for r in rows if r["error"] is None)
        repeats.append(Repeat(rows, served, len(rows) - served, b.duration, _gl_stated(b)))
    strat = rep.benchmarks[0].config.strategy
    return PeerRun("guidellm", rep.metadata.guidellm_version, "guidellm", path, loads.pop(),
                   repeats, {"strategy": strat.type_})  # fmt: skip


# --------------------------------------------------------------------------------- AIPerf


class _Stat(_Loose):
    avg: NonNegativeFloat | None = None
    p50: NonNegativeFloat | None = None
    p90: NonNegativeFloat | None = None
    p99: NonNegativeFloat | None = None


class AiperfExport(_Loose):
    aiperf_version: str
    time_to_first_token: _Stat
    request_count: _Stat
    benchmark_duration: _Stat
    request_throughput: _Stat | None = None
    error_request_count: _Stat | None = None
    input_config: dict[str, Any] = Field(default_factory=dict)
    was_cancelled: bool = False


class _Value(_Loose):
    value: Any = None


class AiperfRecord(_Loose):
    metadata: dict[str, Any]
    metrics: dict[str, _Value]
    error: dict[str, Any] | str | None = None


def _aiperf_load(cfg: dict[str, Any]) -> Load:
    phases = cfg.get("phases") or [{}]
    phase = phases[-1] if isinstance(phases[-1], dict) else {}
    conc = phase.get("concurrency")
    conc = conc if isinstance(conc, int) and not isinstance(conc, bool) and conc > 0 else None
    for key in ("rate", "request_rate"):
        if isinstance(phase.get(key), (int, float)) and phase[key] > 0:
            return Load(float(phase[key]), conc)
    return Load(math.inf, conc)


def _export(ex: AiperfExport) -> tuple[Repeat, Load]:
    """The summary export as one summary-only repeat and its load."""
    done = int(ex.request_count.avg or 0)
    failed = int(ex.error_request_count.avg or 0) if ex.error_request_count else 0
    ttft = ex.time_to_first_token
    thr = ex.request_throughput.avg if ex.request_throughput else None
    stated = {"mean_ttft_ms": ttft.avg, "median_ttft_ms": ttft.p50, "p90_ttft_ms": ttft.p90,
              "p99_ttft_ms": ttft.p99, "req_per_s": thr, "completed": float(done)}  # fmt: skip
    return Repeat(None, done, failed, ex.benchmark_duration.avg, stated), _aiperf_load(
        ex.input_config
    )


def _sibling_export(path: Path) -> AiperfExport | None:
    """AIPerf writes ``profile_export_aiperf.json`` beside ``profile_export.jsonl``: the
    records' load and the tool's own summary come from it (None when it is not there)."""
    sibling = path.parent / "profile_export_aiperf.json"
    if path.name == sibling.name or not sibling.is_file():
        return None
    try:
        objs = json_objects(read_text_bounded(sibling, MAX_BYTES, "AIPerf export"), str(sibling))
        return AiperfExport.model_validate(objs[0])
    except (OSError, ValueError) as exc:  # PeerFormatError, ValidationError, LimitError
        raise PeerFormatError(f"{sibling} (the export beside {path.name}): {exc}") from None


def read_aiperf(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    if "aiperf_version" not in objs[0]:
        return _read_aiperf_records(objs, path)
    try:
        ex = AiperfExport.model_validate(objs[0])
    except ValidationError as exc:
        raise field_error(exc, f"{path} (AIPerf JSON export)") from None
    if ex.request_count.avg is None or ex.benchmark_duration.avg is None:
        raise PeerFormatError(f"{path}: request_count.avg and benchmark_duration.avg are needed")
    rep, load = _export(ex)
    return PeerRun("aiperf", ex.aiperf_version, "aiperf", path, load, [rep],
                   {"cancelled": ex.was_cancelled or None})  # fmt: skip


def _read_aiperf_records(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    rows: list[dict[str, Any]] = []
    starts: list[int] = []
    ends: list[int] = []
    for k, obj in enumerate(objs):
        try:
            rec = AiperfRecord.model_validate(obj)
        except ValidationError as exc:
            raise field_error(exc, f"{path} (AIPerf record {k + 1})") from None
        if rec.metadata.get("benchmark_phase", "profiling") != "profiling":
            continue  # warm-up records are not measured
        ttft = (rec.metrics.get("time_to_first_token") or _Value()).value
        if ttft is not None and (not isinstance(ttft, (int, float)) or ttft < 0):
            raise PeerFormatError(f"{path}: record {k + 1}: time_to_first_token {ttft!r}")
        err = None if rec.error is None and ttft is not None else str(rec.error or "no TTFT")
        for key, into in (("request_start_ns", starts), ("request_end_ns", ends)):
            if isinstance(rec.metadata.get(key), int):
                into.append(rec.metadata[key])
        rows.append({"rid": len(rows), "error": err, "ttft_ms": None if err else ttft})
    if not rows:
        raise PeerFormatError(f"{path}: no profiling record in the AIPerf export")
    span = (max(ends) - min(starts)) / 1e9 if starts and ends else None
    served = sum(1 for r in rows if r["error"] is None)
    ex = _sibling_export(path)
    summary, load = _export(ex) if ex is not None else (None, UNRECORDED)
    rep = Repeat(rows, served, len(rows) - served, span, summary.stated if summary else {})
    beside = "profile_export_aiperf.json" if ex is not None else None
    details = {"export": "profile_export.jsonl", "summary_from": beside}
    return PeerRun("aiperf", ex.aiperf_version if ex else None, "aiperf", path, load, [rep],
                   details)  # fmt: skip
