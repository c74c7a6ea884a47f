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

from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeFloat, NonNegativeInt, ValidationError

from kimi_bench.peers.formats import PeerFormatError, PeerRun, Repeat, _Loose, field_error


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


class _GlConfig(_Loose):
    strategy: _GlStrategy


class _GlBenchmark(_Loose):
    config: _GlConfig
    requests: _GlRequests
    duration: NonNegativeFloat


class _GlMeta(_Loose):
    guidellm_version: str


class GuidellmReport(_Loose):
    metadata: _GlMeta
    benchmarks: list[_GlBenchmark]


def _gl_label(s: _GlStrategy) -> float | str:
    if s.type_ in ("constant", "poisson") and s.rate:
        return float(s.rate)
    if s.type_ == "synchronous":
        return "sync"
    if s.type_ == "concurrent" and s.streams:
        return f"c{s.streams}"
    return float("inf")


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
    labels = {_gl_label(b.config.strategy) for b in rep.benchmarks}
    if len(labels) > 1:
        raise PeerFormatError(
            f"{path}: benchmarks of several strategies ({', '.join(map(str, labels))}): run "
            "GuideLLM with one profile per file to import it"
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
        repeats.append(Repeat(rows, served, len(rows) - served, b.duration, {}))
    strat = rep.benchmarks[0].config.strategy
    return PeerRun("guidellm", rep.metadata.guidellm_version, "guidellm", path, labels.pop(),
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


def _aiperf_label(cfg: dict[str, Any]) -> float | str:
    phases = cfg.get("phases") or [{}]
    phase = phases[-1] if isinstance(phases[-1], dict) else {}
    if isinstance(phase.get("rate"), (int, float)):
        return float(phase["rate"])
    if isinstance(phase.get("request_rate"), (int, float)):
        return float(phase["request_rate"])
    if isinstance(phase.get("concurrency"), int):
        return f"c{phase['concurrency']}"
    return float("inf")


def read_aiperf(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    if "aiperf_version" not in objs[0]:
        return _read_aiperf_records(objs, path)
    try:
        ex = AiperfExport.model_validate(objs[0])
    except ValidationError as exc:
        raise field_error(exc, f"{path} (AIPerf JSON export)") from None
    if ex.request_count.avg is None or ex.benchmark_duration.avg is None:
        raise PeerFormatError(f"{path}: request_count.avg and benchmark_duration.avg are needed")
    done = int(ex.request_count.avg)
    failed = int(ex.error_request_count.avg or 0) if ex.error_request_count else 0
    ttft = ex.time_to_first_token
    thr = ex.request_throughput.avg if ex.request_throughput else None
    stated = {"median_ttft_ms": ttft.p50, "p90_ttft_ms": ttft.p90, "p99_ttft_ms": ttft.p99,
              "req_per_s": thr}  # fmt: skip
    rep = Repeat(None, done, failed, ex.benchmark_duration.avg, stated)
    return PeerRun("aiperf", ex.aiperf_version, "aiperf", path, _aiperf_label(ex.input_config),
                   [rep], {"cancelled": ex.was_cancelled or None})  # fmt: skip


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
    rep = Repeat(rows, served, len(rows) - served, span, {})
    return PeerRun("aiperf", None, "aiperf", path, "unrecorded", [rep],
                   {"export": "profile_export.jsonl"})  # fmt: skip
