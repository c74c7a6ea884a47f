"""AIPerf 0.13's exports.

- ``profile_export_aiperf.json``: the summary (each metric ``{unit, avg, p50, p90, p95,
  p99, ...}``: ``time_to_first_token``, ``inter_token_latency`` (AIPerf's per-request
  (latency - TTFT) / (output tokens - 1): kimi-bench's TPOT), ``inter_chunk_latency``
  (every gap, pooled: kimi-bench's ITL), ``request_latency`` (E2E), ``request_count``,
  ``benchmark_duration``, ``error_summary``) and the run's ``input_config`` (its phases:
  the load and any warm-up). No per-request data.
- ``profile_export.jsonl``: one record per request (``metadata`` with ``x_request_id`` and
  its start/end in ns, ``metrics`` each ``{value, unit}``). Read as per-request rows; the
  export beside it gives the load, the version and the tool's summary, checked against the
  rows (AIPerf's linear percentiles; ``inter_chunk_latency``'s percentiles come from a
  t-digest and are shown, not recomputed). Without the export the load is not recorded.

Units are read as labelled (``ms``, ``us``, ``ns``, ``s``/``sec``); an unknown label is
refused.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from kimi_bench.infra.limits import read_text_bounded
from kimi_bench.peers.base import (
    MAX_BYTES,
    PeerFormatError,
    PeerRun,
    Repeat,
    Stated,
    _Loose,
    field_error,
    json_objects,
)
from kimi_bench.peers.figures import (
    Figure,
    PeerRow,
    check_figures,
    check_rows_physical,
    peak_in_flight,
)
from kimi_bench.peers.load import FIELDS, Load
from kimi_bench.results.peer_stats import numpy_stat

METHOD = "AIPerf's linear interpolation at q/100 x (n-1)"
_TO_MS = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3, "sec": 1e3}
# AIPerf's metric -> kimi-bench's metric
_METRICS = {
    "time_to_first_token": "ttft",
    "inter_chunk_latency": "itl",
    "inter_token_latency": "tpot",
    "request_latency": "e2e",
}
_STATS = {"avg": "mean", "p50": "median", "p90": "p90", "p95": "p95", "p99": "p99"}


def is_aiperf(obj: dict[str, Any]) -> bool:
    return "aiperf_version" in obj or ("metadata" in obj and "metrics" in obj)


def to_ms(value: Any, unit: Any, where: str) -> float | None:
    """A time as labelled, in ms (None when absent)."""
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise PeerFormatError(f"{where}: {value!r} is not a time")
    if unit not in _TO_MS:
        raise PeerFormatError(f"{where}: unit {unit!r} is not a time unit ({', '.join(_TO_MS)})")
    return float(value) * _TO_MS[unit]


class AiperfExport(_Loose):
    aiperf_version: str
    request_count: dict[str, Any]
    benchmark_duration: dict[str, Any]
    input_config: dict[str, Any] = Field(default_factory=dict)
    was_cancelled: bool = False


class AiperfRecord(_Loose):
    metadata: dict[str, Any]
    metrics: dict[str, dict[str, Any]]
    error: dict[str, Any] | str | None = None


def _load(cfg: dict[str, Any]) -> Load:
    """The profiling phase's load (rate, concurrency cap, arrival shape) and any warm-up
    phase; a ``concurrency`` phase is unpaced; a field a phase lacks is not recorded."""
    phases = [p for p in cfg.get("phases") or [] if isinstance(p, dict)]
    prof = [p for p in phases if (p.get("kind") or p.get("name")) == "profiling"] or phases[-1:]
    if not prof:
        return Load(None, unrecorded=frozenset(FIELDS))
    phase = prof[-1]
    conc = phase.get("concurrency")
    conc = conc if isinstance(conc, int) and not isinstance(conc, bool) and conc > 0 else None
    warm = [p for p in phases if (p.get("kind") or p.get("name")) == "warmup"]
    shown = (f"{w.get('requests') or w.get('duration')} ({w.get('type')})" for w in warm)
    warmup = ", ".join(shown) or "none"
    rate, kind = phase.get("rate"), phase.get("type")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
        burst = {"poisson": 1.0, "constant": math.inf}.get(str(kind), phase.get("smoothness"))
        missing = frozenset() if isinstance(burst, (int, float)) else frozenset({"burstiness"})
        return Load(float(rate), conc, burst if not missing else None, warmup, missing)
    lost = set() if conc else {"max_concurrency"}
    if kind != "concurrency":  # a paced phase without its rate, or a kind not read here
        lost |= {"request_rate", "burstiness"}
    return Load(math.inf if kind == "concurrency" else None, conc, None, warmup, frozenset(lost))


def _stat_figures(ex: dict[str, Any], where: str) -> list[Figure]:
    out = []
    for name, metric in _METRICS.items():
        block = ex.get(name)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise PeerFormatError(f"{where}: field {name}: expected an object, got {block!r:.40}")
        for key, stat in _STATS.items():
            v = to_ms(block.get(key), block.get("unit"), f"{where}: {name}.{key}")
            out.append(Figure(f"{name}.{key}", metric, stat, v, method=METHOD))
    return out


def _avg(ex: dict[str, Any], name: str) -> float | None:
    v = (ex.get(name) or {}).get("avg") if isinstance(ex.get(name), dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _failed(ex: dict[str, Any], done: int, where: str) -> int | None:
    """Failed requests: ``error_request_count`` (written when some failed), else the
    ``error_summary`` counts; both against ``request_error_rate``."""
    summary = ex.get("error_summary")
    listed = None
    if isinstance(summary, list):
        listed = sum(int(e.get("count") or 0) for e in summary if isinstance(e, dict))
    count = _avg(ex, "error_request_count")
    failed = int(count) if count is not None else listed
    if count is not None and listed is not None and int(count) != listed:
        raise PeerFormatError(
            f"{where}: error_request_count says {int(count)} but error_summary lists "
            f"{listed} failed requests: the file disagrees with itself (an edited file?)"
        )
    rate = _avg(ex, "request_error_rate")
    if failed is not None and rate is not None and done + failed > 0:
        mine = failed / (done + failed) * 100
        if not math.isclose(rate, mine, rel_tol=1e-6, abs_tol=1e-9):
            raise PeerFormatError(
                f"{where}: request_error_rate says {rate:.6g}% but {failed} failed of "
                f"{done + failed} give {mine:.6g}%: the file disagrees with itself"
            )
    return failed


def read_export(ex_obj: dict[str, Any], where: str, file: str) -> tuple[Repeat, Load, str]:
    try:
        ex = AiperfExport.model_validate(ex_obj)
    except ValidationError as exc:
        raise field_error(exc, f"{where} (AIPerf JSON export)") from None
    done_v, dur = _avg(ex_obj, "request_count"), _avg(ex_obj, "benchmark_duration")
    if done_v is None or dur is None:
        raise PeerFormatError(f"{where}: request_count.avg and benchmark_duration.avg are needed")
    unit = ex.benchmark_duration.get("unit")
    dur_s = (to_ms(dur, unit, f"{where}: benchmark_duration") or 0.0) / 1e3
    done = int(done_v)
    figs = _stat_figures(ex_obj, where)
    thr = _avg(ex_obj, "request_throughput")
    figs.append(
        Figure(
            "request_throughput.avg",
            "req_per_s",
            "value",
            thr,
            None,
            "AIPerf's request count / its observation window (not in the export); "
            f"request_count / benchmark_duration = {done / dur_s if dur_s else 0:.6g}",
            "req/s",
        )
    )
    good = _avg(ex_obj, "goodput")
    if good is not None:  # AIPerf's SLOs are in its input_config: carried, not recomputed
        figs.append(
            Figure(
                "goodput.avg",
                "goodput_req_per_s",
                "value",
                good,
                None,
                "the tool's SLOs; not recomputed",
                "req/s",
            )
        )
    check_figures(figs, where, file)
    if thr is not None and dur_s > 0 and not 0.95 <= thr * dur_s / max(done, 1) <= 1.05:
        raise PeerFormatError(
            f"{where}: request_throughput.avg {thr:.6g} req/s is not request_count / "
            f"benchmark_duration ({done} / {dur_s:.6g} s = {done / dur_s:.6g}) within the 5% "
            "AIPerf's observation window allows: the file disagrees with itself"
        )
    for f in figs:
        if f.metric == "e2e" and f.stated is not None and f.stated > dur_s * 1e3 * 1.01 + 1:
            raise PeerFormatError(
                f"{where}: request_latency.{f.key.rsplit('.', 1)[-1]} {f.stated:.6g} ms is "
                f"longer than the whole benchmark ({dur_s:.6g} s) in {file}: a unit "
                "mislabelled or a figure edited"
            )
    stated = Stated.of(figs, thr, float(done), False)
    rep = Repeat(None, done, _failed(ex_obj, done, where), dur_s, stated, figs)
    load = _load(ex.input_config)
    conc = ex_obj.get("effective_concurrency")
    top = conc.get("max") if isinstance(conc, dict) else None
    if (
        load.max_concurrency is not None
        and isinstance(top, (int, float))
        and (top > load.max_concurrency)
    ):
        raise PeerFormatError(
            f"{where}: {file} says concurrency {load.max_concurrency} but its own "
            f"effective_concurrency.max is {top:g}: the load it states is contradicted by its "
            "own figures (refused, not relabelled)"
        )
    return rep, load, ex.aiperf_version


def sibling_export(path: Path) -> dict[str, Any] | None:
    """AIPerf writes ``profile_export_aiperf.json`` beside ``profile_export.jsonl``."""
    sibling = path.parent / "profile_export_aiperf.json"
    if path.name == sibling.name or not sibling.is_file():
        return None
    try:
        return json_objects(read_text_bounded(sibling, MAX_BYTES, "AIPerf export"), str(sibling))[0]
    except (OSError, ValueError) as exc:
        raise PeerFormatError(f"{sibling} (the export beside {path.name}): {exc}") from None


def _value(rec: AiperfRecord, name: str, where: str) -> Any:
    m = rec.metrics.get(name)
    if not isinstance(m, dict) or m.get("value") is None:
        return None
    v = m["value"]
    if isinstance(v, list):
        return [to_ms(x, m.get("unit"), f"{where}: {name}") for x in v]
    return to_ms(v, m.get("unit"), f"{where}: {name}")


def _record_row(rec: AiperfRecord, rid: int, where: str) -> tuple[PeerRow, float | None]:
    ttft = _value(rec, "time_to_first_token", where)
    err = None if rec.error is None and ttft is not None else str(rec.error or "no TTFT")
    n = (rec.metrics.get("output_sequence_length") or {}).get("value")
    n = n if isinstance(n, int) and not isinstance(n, bool) else None
    isl = (rec.metrics.get("input_sequence_length") or {}).get("value")
    row = PeerRow(
        rid=rid,
        request_id=rec.metadata.get("x_request_id"),
        error=err,
        ttft_ms=None if err else ttft,
        input_tokens=isl if isinstance(isl, int) else None,
        prompt_tokens=isl if isinstance(isl, int) else None,
        output_tokens=n,
    )
    if err is None:
        gaps = _value(rec, "inter_chunk_latency", where)
        row.itl_ms = gaps if isinstance(gaps, list) else None
        row.e2e_ms = e2e = _value(rec, "request_latency", where)
        if e2e is not None and ttft is not None and n is not None and n > 1:
            row.tpot_ms = (e2e - ttft) / (n - 1)
    aiperf_itl = _value(rec, "inter_token_latency", where) if err is None else None
    return row, aiperf_itl if isinstance(aiperf_itl, float) else None


def _records(
    objs: list[dict[str, Any]], path: Path
) -> tuple[list[PeerRow], list[float], list[tuple[float, float]]]:
    rows: list[PeerRow] = []
    own_itl: list[float] = []
    spans: list[tuple[float, float]] = []
    seen: dict[Any, int] = {}
    for k, obj in enumerate(objs):
        where = f"{path}: record {k + 1}"
        try:
            rec = AiperfRecord.model_validate(obj)
        except ValidationError as exc:
            raise field_error(exc, f"{path} (AIPerf record {k + 1})") from None
        if rec.metadata.get("benchmark_phase", "profiling") != "profiling":
            continue  # warm-up records are not measured
        row, itl = _record_row(rec, len(rows), where)
        ident = row.request_id
        if ident is not None and ident in seen:
            raise PeerFormatError(
                f"{where}: x_request_id {ident} is record {seen[ident]} again: each request "
                "is recorded once; a duplicate would count twice"
            )
        seen[ident] = k + 1
        rows.append(row)
        if itl is not None:
            own_itl.append(itl)
        md = rec.metadata
        if isinstance(md.get("request_start_ns"), int) and isinstance(
            md.get("request_end_ns"), int
        ):
            spans.append((md["request_start_ns"] / 1e9, md["request_end_ns"] / 1e9))
    if not rows:
        raise PeerFormatError(f"{path}: no profiling record in the AIPerf export")
    return rows, own_itl, spans


def _against_rows(rep: Repeat, rows: list[PeerRow], own_itl: list[float]) -> None:
    ok = [r for r in rows if r.error is None]
    samples = {
        "ttft": [r.ttft_ms for r in ok if r.ttft_ms is not None],
        "e2e": [r.e2e_ms for r in ok if r.e2e_ms is not None],
        "tpot": own_itl,
    }
    gaps = [x for r in ok for x in r.itl_ms or []]
    for f in rep.figures:
        if samples.get(f.metric):
            f.rows = numpy_stat(samples[f.metric], f.stat)
        elif f.metric == "itl" and gaps:
            if f.stat == "mean":
                f.rows = numpy_stat(gaps, "mean")
            else:
                f.method = "t-digest (AIPerf's approximate sketch): not recomputed"
    rep.figures.append(
        Figure(
            "request_count.avg",
            "completed",
            "value",
            float(rep.completed),
            float(len(ok)),
            "the records",
            "requests",
        )
    )
    if rep.failed is not None:
        rep.figures.append(
            Figure(
                "error_summary",
                "failed",
                "value",
                float(rep.failed),
                float(len(rows) - len(ok)),
                "the records",
                "requests",
            )
        )


def read_aiperf(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    if "aiperf_version" in objs[0]:
        if len(objs) != 1:
            raise PeerFormatError(f"{path}: an AIPerf JSON export is one object")
        rep, load, ex_version = read_export(objs[0], str(path), path.name)
        return PeerRun(
            "aiperf",
            ex_version,
            "aiperf",
            path,
            load,
            [rep],
            {"cancelled": bool(objs[0].get("was_cancelled")) or None},
        )
    rows, own_itl, spans = _records(objs, path)
    ex = sibling_export(path)
    span = (max(e for _, e in spans) - min(s for s, _ in spans)) if spans else None
    served = sum(1 for r in rows if r.error is None)
    version: str | None = None
    if ex is None:
        rep = Repeat(rows, served, len(rows) - served, span)
        load = Load(None, unrecorded=frozenset(FIELDS))
    else:
        beside = f"{path.parent / 'profile_export_aiperf.json'}"
        rep, load, version = read_export(ex, beside, "profile_export_aiperf.json")
        rep.rows = rep.rows if rep.rows is not None else rows
        _against_rows(rep, rows, own_itl)
        check_figures(rep.figures, f"{path} (against {beside})", path.name)
        rep.failed = len(rows) - served
    check_rows_physical(rows, rep.duration_s, str(path), path.name)
    peak = peak_in_flight(spans)
    if load.max_concurrency is not None and peak > load.max_concurrency:
        raise PeerFormatError(
            f"{path}: the export says concurrency {load.max_concurrency} but the records show "
            f"{peak} requests in flight at once (their own start and end times): the load "
            "it states is contradicted by its own records (refused, not relabelled)"
        )
    details = {
        "export": "profile_export.jsonl",
        "summary_from": "profile_export_aiperf.json" if ex is not None else None,
    }
    return PeerRun("aiperf", version, "aiperf", path, load, [rep], details)
