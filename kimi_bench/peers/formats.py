"""sglang.bench_serving and vllm bench serve result files, validated with pydantic, each
read into :class:`PeerRun` with every figure the tool states checked against its rows.

- sglang.bench_serving 0.5.23 ``--output-file``: JSON Lines, one object per benchmark run
  (a file appended to by several runs holds several; each is one repeat). With
  ``--output-details`` each object carries per-request ``ttfts`` (seconds), ``itls``,
  ``input_lens``, ``output_lens`` and ``errors`` ("" when the request succeeded); no
  per-request E2E and no start times. It writes no warm-up, and no burstiness: it has no
  such option, a finite rate is always Poisson (burstiness 1, ``SGLANG_BURSTINESS``).
- ``vllm bench serve`` 0.33.0 ``--save-result``: one JSON object (``--append-result``:
  several, one per line). With ``--save-detailed`` it keeps the per-request lists, among
  them ``latencies`` (E2E, seconds) and ``start_times``; it records no warm-up.

A load field the file does not hold is **not recorded** (a null the tool wrote means "no
limit"/"unlimited", as the tools write it; an absent key is not read as either). A file
is refused (:class:`PeerFormatError`, naming the field and both figures) when its rows and
its summary disagree, a row or run line appears twice, a request ends before its first
token or outlasts the run, or the load it states is contradicted by its own concurrency.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kimi_bench.peers.base import (
    MAX_BYTES,
    PeerFormatError,
    PeerRun,
    Repeat,
    Stated,
    field_error,
    json_objects,
    once_each,
    rate_value,
)
from kimi_bench.peers.figures import (
    Figure,
    PeerRow,
    bucket_peak,
    check_figures,
    check_rows_physical,
    peak_in_flight,
)
from kimi_bench.peers.load import Load
from kimi_bench.peers.serving import SglangResult, VllmResult, _rows, _Serving
from kimi_bench.results.peer_stats import numpy_stat

__all__ = [
    "MAX_BYTES",
    "PeerFormatError",
    "PeerRun",
    "Repeat",
    "json_objects",
    "read_sglang",
    "read_vllm",
]

_SGLANG_KEY = re.compile(r"^(mean|median|p\d+(?:\.\d+)?)_(ttft|itl|tpot|e2e_latency)_ms$")
_VLLM_KEY = re.compile(r"^(mean|median|p\d+(?:\.\d+)?)_(ttft|itl|tpot|e2el)_ms$")
_METRIC = {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e_latency": "e2e", "e2el": "e2e"}
# sglang.bench_serving (0.5.23: ``get_request`` in ``sglang/benchmark/serving.py``) paces a
# finite rate with ``np.random.exponential`` gaps and has no other arrival shape: Poisson
# arrivals, vLLM's burstiness 1. Not written into its file because it never varies.
SGLANG_BURSTINESS = 1.0


def _latency_figures(obj: dict[str, Any], pattern: re.Pattern[str], tool: str) -> list[Figure]:
    out = []
    for key, v in obj.items():
        m = pattern.match(key)
        if m and isinstance(v, (int, float)) and not isinstance(v, bool):
            stat, metric = m.group(1), _METRIC[m.group(2)]
            if not math.isfinite(v) or v < 0:
                raise PeerFormatError(f"{tool}: {key} {v!r} is not a latency in ms")
            out.append(Figure(key, metric, stat, float(v), method="numpy (the tool's own)"))
    return out


def _recompute(
    figs: list[Figure],
    rows: list[PeerRow],
    res: _Serving,
    exact_e2e: bool,
    itl_checked: bool,
) -> None:
    """Each latency figure recomputed from the served rows by numpy, as the tools do.
    Without per-request E2E (sglang) TTFT + the gaps bound E2E and TPOT from below."""
    ok = [r for r in rows if r.error is None and r.ttft_ms is not None]
    samples: dict[str, list[float]] = {"ttft": [r.ttft_ms for r in ok if r.ttft_ms is not None]}
    if itl_checked:
        samples["itl"] = [x for r in ok for x in r.itl_ms or []]
    lower: dict[str, list[float]] = {}
    if exact_e2e:
        samples["e2e"] = [r.e2e_ms for r in ok if r.e2e_ms is not None]
        samples["tpot"] = [r.tpot_ms for r in ok if r.tpot_ms is not None]
    elif res.itls is not None:
        lower["e2e"] = [(r.ttft_ms or 0.0) + sum(r.itl_ms or []) for r in ok]
        lower["tpot"] = [
            sum(r.itl_ms or []) / (r.output_tokens - 1)
            for r in ok
            if r.output_tokens is not None and r.output_tokens > 1
        ]
    for f in figs:
        if samples.get(f.metric):
            f.rows = numpy_stat(samples[f.metric], f.stat)
        elif lower.get(f.metric):
            f.rows, f.bound = numpy_stat(lower[f.metric], f.stat), "at_least"
            f.method = "numpy; rows bound it from below (TTFT + gaps: no per-request E2E)"


def _counts(
    res: _Serving, rows: list[PeerRow] | None, failed: int | None, where: str
) -> tuple[int | None, list[Figure]]:
    """Completed, failed, throughputs and output tokens against the rows and duration."""
    figs = [Figure("completed", "completed", "value", float(res.completed), unit="requests")]
    if rows is not None:
        served = [r for r in rows if r.error is None]
        figs[0].rows = float(len(served))
        if failed is not None:
            figs.append(
                Figure(
                    "failed",
                    "failed",
                    "value",
                    float(failed),
                    float(len(rows) - len(served)),
                    unit="requests",
                )
            )
        failed = len(rows) - len(served)
        if res.total_output_tokens is not None and res.output_lens is not None:
            figs.append(
                Figure(
                    "total_output_tokens",
                    "output_tokens",
                    "value",
                    float(res.total_output_tokens),
                    float(sum(r.output_tokens or 0 for r in served)),
                    unit="tokens",
                )
            )
    dur = res.duration
    if dur > 0:
        figs.append(
            Figure(
                "request_throughput",
                "req_per_s",
                "value",
                res.request_throughput,
                res.completed / dur,
                "completed / duration",
                "req/s",
            )
        )
        if res.total_output_tokens is not None:
            figs.append(
                Figure(
                    "output_throughput",
                    "output_tokens_per_s",
                    "value",
                    res.output_throughput,
                    res.total_output_tokens / dur,
                    "total_output_tokens / duration",
                    "tok/s",
                )
            )
    return failed, figs


def _load(res: _Serving, obj: dict[str, Any], where: str, tool: str) -> Load:
    missing = {k for k in ("request_rate", "max_concurrency") if k not in obj}
    burst = res.burstiness
    if "burstiness" not in obj:
        if tool == "sglang":  # no burstiness option: its paced gaps are exponential
            burst = SGLANG_BURSTINESS
        else:
            missing.add("burstiness")
    missing.add("warmup")  # neither tool writes its warm-up into the result file
    rate = None if "request_rate" in missing else rate_value(res.request_rate, where)
    return Load(rate, res.max_concurrency, burst, None, frozenset(missing))


def _concurrency(
    res: _Serving,
    rows: list[PeerRow] | None,
    stated: list[Figure],
    where: str,
    file: str,
) -> list[Figure]:
    """The file's own concurrency against the limit it states: the peak in flight (vLLM's
    start times and latencies) or the mean (sum of E2E / duration, sglang's figure)."""
    figs: list[Figure] = []
    limit = res.max_concurrency
    spans = None
    if rows is not None and res.start_times is not None and res.latencies is not None:
        spans = [
            (res.start_times[r.rid], res.start_times[r.rid] + res.latencies[r.rid])
            for r in rows
            if r.error is None
        ]
        figs.append(
            Figure(
                "max_concurrent_requests",
                "peak_concurrency_per_second",
                "value",
                _num(res.max_concurrent_requests),
                float(bucket_peak(spans)),
                "requests active in each whole second",
                "requests",
            )
        )
        peak = peak_in_flight(spans)
        if limit is not None and peak > limit:
            _contradicted(
                where,
                file,
                limit,
                f"{peak} requests in flight at once (its own start times and latencies)",
            )
    mean_conc = getattr(res, "concurrency", None)
    if isinstance(mean_conc, (int, float)) and limit is not None and mean_conc > limit * 1.01:
        _contradicted(
            where,
            file,
            limit,
            f"a mean of {mean_conc:.3g} requests in flight "
            "(its own concurrency: sum of E2E / duration)",
        )
    if limit is not None:
        _mean_in_flight(res, stated, limit, where, file)
    return figs


def _mean_in_flight(res: _Serving, stated: list[Figure], limit: int, where: str, file: str) -> None:
    """Without per-request times (a summary), the file's own means still bound how many
    requests were in flight: completed x mean E2E (else mean TTFT, which no request
    outlasts) / duration is at most the mean in flight, so at most the limit."""
    means = {f.metric: f.stated for f in stated if f.stat == "mean" and f.stated is not None}
    metric = "e2e" if "e2e" in means else "ttft"
    mean = means.get(metric)
    if mean is None or res.duration <= 0:
        return
    least = mean / 1e3 * res.completed / res.duration
    if least > limit * 1.01:
        key = next(f.key for f in stated if (f.metric, f.stat) == (metric, "mean"))
        _contradicted(
            where,
            file,
            limit,
            f"at least {least:.3g} requests in flight on average (its own completed x "
            f"{key} / duration)",
        )


def _contradicted(where: str, file: str, limit: int, shows: str) -> None:
    raise PeerFormatError(
        f"{where}: {file} says max_concurrency {limit} but shows {shows}: the load it "
        "states is contradicted by its own figures (refused, not relabelled)"
    )


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _repeat(
    res: _Serving, obj: dict[str, Any], tool: str, failed: int | None, where: str, file: str
) -> Repeat:
    rows = _rows(res, where)
    pattern = _SGLANG_KEY if tool == "sglang" else _VLLM_KEY
    figs = _latency_figures(obj, pattern, where)
    # sglang's chat backends count a speculative server's ITL per retokenized token
    retokenized = (
        tool == "sglang"
        and (res.accept_length or 0) > 0
        and getattr(res, "backend", None) in ("sglang-oai", "sglang-oai-chat")
    )
    itl_checked = rows is not None and res.itls is not None and not retokenized
    if retokenized:
        for f in figs:
            if f.metric == "itl":
                f.method = "per retokenized token (speculative server): not the rows' gaps"
    if rows is not None:
        _recompute(figs, rows, res, res.latencies is not None, itl_checked)
    failed, counted = _counts(res, rows, failed, where)
    figs += counted
    mean_e2e = obj.get("mean_e2e_latency_ms")
    conc = getattr(res, "concurrency", None)
    if tool == "sglang" and isinstance(mean_e2e, (int, float)) and res.duration > 0:
        figs.append(
            Figure(
                "concurrency",
                "mean_concurrency",
                "value",
                _num(conc),
                mean_e2e * res.completed / 1e3 / res.duration,
                "mean_e2e_latency_ms x completed / duration",
                "requests",
            )
        )
    check_figures(figs, where, file)
    for f in figs:
        if f.metric == "e2e" and f.stated is not None and f.stated > res.duration * 1e3 * 1.01 + 1:
            raise PeerFormatError(
                f"{where}: {f.key} {f.stated:.6g} ms is longer than the whole benchmark "
                f"({res.duration:.6g} s) in {file}: no request outlasts the run that measured "
                "it (E2E in the wrong unit, or the duration edited?)"
            )
    if rows is not None:
        check_rows_physical(rows, res.duration, where, file)
    stated = Stated.of(figs, res.request_throughput, float(res.completed), itl_checked)
    if res.request_goodput is not None:
        figs.append(
            Figure(
                "request_goodput",
                "goodput_req_per_s",
                "value",
                res.request_goodput,
                None,
                "SLOs applied by the tool; not recomputed",
                "req/s",
            )
        )
    return Repeat(rows, res.completed, failed, res.duration, stated, figs)


def _read(objs: list[dict[str, Any]], path: Path, tool: str) -> tuple[list[Any], PeerRun]:
    name = "sglang.bench_serving" if tool == "sglang" else "vllm bench serve"
    once_each(objs, str(path), f"{name} result")
    model = SglangResult if tool == "sglang" else VllmResult
    repeats, loads, parsed = [], set(), []
    for k, obj in enumerate(objs):
        where = f"{path} ({name} result {k + 1})"
        try:
            res = model.model_validate(obj)
        except ValidationError as exc:
            raise field_error(exc, where) from None
        parsed.append(res)
        load = _load(res, obj, where, tool)
        loads.add(load)
        failed = None
        if isinstance(res, VllmResult):
            failed = res.failed if "failed" in obj else None
            _prompts(res, failed, where)
        rep = _repeat(res, obj, tool, failed, where, path.name)
        repeats.append(rep)
        concurrency = _concurrency(res, rep.rows, rep.figures, where, path.name)
        check_figures(concurrency, where, path.name)
        rep.figures += concurrency
    if len(loads) > 1:
        shown = "; ".join(sorted(x.text() for x in loads))
        raise PeerFormatError(f"{path}: runs at different loads ({shown}): import each separately")
    return parsed, PeerRun(name, None, tool, path, loads.pop(), repeats)


def _prompts(res: VllmResult, failed: int | None, where: str) -> None:
    if res.ttfts is not None and len(res.ttfts) != res.num_prompts:
        raise PeerFormatError(
            f"{where}: num_prompts is {res.num_prompts} but ttfts has {len(res.ttfts)} entries"
        )
    if failed is not None and res.completed + failed != res.num_prompts:
        raise PeerFormatError(
            f"{where}: completed {res.completed} + failed {failed} is not num_prompts "
            f"{res.num_prompts}: vllm bench serve counts every prompt once (an edited count?)"
        )


def read_sglang(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    parsed, run = _read(objs, path, "sglang")
    first = parsed[0]
    info = first.server_info or {}
    run.details = {
        "backend": first.backend,
        "dataset": first.dataset_name,
        "server_version": info.get("version"),
    }
    return run


def read_vllm(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    parsed, run = _read(objs, path, "vllm")
    first = parsed[0]
    run.details = {
        "backend": first.backend or first.endpoint_type,
        "model": first.model_id,
        "date": first.date,
    }
    return run
