"""The one-lie variants ``kimi-bench import`` must refuse (``tests.peers.lies``): per tool
and version, the lies of issue 45 (a missing load field, a load its own concurrency
contradicts, E2E rows scaled, a median over its p99, a duration that changes the
throughput, failures hidden, percentiles/TPOT/E2E summaries that disagree with the rows,
duplicated rows with counts fixed, a run line twice, E2E under TTFT, units relabelled)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.peers import fixtures as fx
from tests.peers.lies import (
    Files,
    Lie,
    _ai,
    _ai_burst_as_c1,
    _ai_errors_dropped,
    _ai_median_over_p99,
    _ai_no_phases,
    _ai_ttft_over_e2e,
    _drop,
    _dup_row,
    _e2e_under_ttft,
    _gl,
    _gl_dup,
    _gl_requests,
    _gl_ttft_stat,
    _gl_unerror,
    _latency_under_ttft,
    _median_over_p99,
    _rec,
    _rec_dup,
    _rec_e2e_under_ttft,
    _rec_metric,
    _records_alone,
    _scale,
    _scale_in,
    _set,
    _sg_unfail,
    _twice,
    _unit,
    _with,
)

SG, SGS, VL, VLS = "sglang", "sglang-summary", "vllm", "vllm-summary"
GL, AI, AR = "guidellm", "aiperf", "aiperf-records"
CONTRADICTED = "is contradicted by its own"
UNRECORDED = "does not record its load"
_E2E_KEYS = tuple(f"{s}_e2e_latency_ms" for s in ("mean", "median", "std", "p90", "p95", "p99"))

LIES: list[Lie] = [
    # sglang.bench_serving 0.5.23
    Lie("sglang-concurrency-removed", SG, "c1", _drop(SG, "max_concurrency"), UNRECORDED, ab=True),
    Lie("sglang-rate-removed", SG, "4", _drop(SG, "request_rate"), UNRECORDED, ab=True),
    Lie("sglang-burst-as-c1", SG, "inf", _set(SG, max_concurrency=1), CONTRADICTED),
    Lie("sglang-e2e-x1000", SGS, "inf", _scale(SGS, _E2E_KEYS, 1000), "concurrency"),
    Lie(
        "sglang-median-over-p99",
        SGS,
        "inf",
        _with(SGS, _median_over_p99),
        "percentiles cannot fall",
    ),
    Lie("sglang-duration-x10", SG, "inf", _scale(SG, ("duration",), 10), "request_throughput"),
    Lie("sglang-failures-hidden", SG, "inf", _with(SG, _sg_unfail), "completed", failed=3),
    Lie("sglang-p90-ttft", SG, "inf", _scale(SG, ("p90_ttft_ms",), 1.1), "p90_ttft_ms"),
    Lie("sglang-p99-itl", SG, "inf", _scale(SG, ("p99_itl_ms",), 0.5), "p99_itl_ms"),
    Lie("sglang-tpot-under-rows", SG, "inf", _scale(SG, ("mean_tpot_ms",), 0.1), "mean_tpot_ms"),
    Lie(
        "sglang-p99-e2e-under-rows",
        SG,
        "inf",
        _with(SG, lambda o: o.update(p99_e2e_latency_ms=o["p99_ttft_ms"])),
        "p99_e2e_latency_ms",
    ),
    Lie("sglang-duplicated-row", SG, "inf", _with(SG, _dup_row), "again"),
    Lie("sglang-run-line-twice", SG, "inf", _twice(SG), "the same run line twice"),
    Lie("sglang-e2e-under-ttft", SGS, "inf", _with(SGS, _e2e_under_ttft), "E2E >= TTFT"),
    Lie("sglang-ttfts-in-ms", SG, "inf", _scale(SG, ("ttfts",), 1000), "mean_ttft_ms"),
    # vllm bench serve 0.33.0
    Lie("vllm-concurrency-removed", VL, "c1", _drop(VL, "max_concurrency"), UNRECORDED, ab=True),
    Lie("vllm-rate-removed", VL, "4", _drop(VL, "request_rate"), UNRECORDED, ab=True),
    Lie("vllm-burstiness-removed", VL, "4", _drop(VL, "burstiness"), UNRECORDED, ab=True),
    Lie("vllm-burst-as-c1", VL, "inf", _set(VL, max_concurrency=1), CONTRADICTED),
    Lie("vllm-e2e-rows-x1000", VL, "inf", _scale(VL, ("latencies",), 1000), "mean_tpot_ms"),
    Lie(
        "vllm-e2e-rows-x1000-no-tpot",
        VL,
        "inf",
        _scale(VL, ("latencies",), 1000),
        "longer than the whole benchmark",
        vllm_metrics="ttft,itl",
    ),
    Lie(
        "vllm-median-over-p99", VLS, "inf", _with(VLS, _median_over_p99), "percentiles cannot fall"
    ),
    Lie("vllm-duration-x10", VL, "inf", _scale(VL, ("duration",), 10), "request_throughput"),
    Lie("vllm-failed-zeroed", VLS, "inf", _set(VLS, failed=0), "num_prompts", failed=3),
    Lie("vllm-failed-rows-differ", VL, "inf", _set(VL, failed=0), "failed", failed=3),
    Lie("vllm-p99-ttft", VL, "inf", _scale(VL, ("p99_ttft_ms",), 0.9), "p99_ttft_ms"),
    Lie("vllm-p99-tpot", VL, "inf", _scale(VL, ("p99_tpot_ms",), 2.0), "p99_tpot_ms"),
    Lie(
        "vllm-mean-e2el",
        VL,
        "inf",
        _scale(VL, ("mean_e2el_ms",), 0.5),
        "mean_e2el_ms",
        vllm_metrics="ttft,tpot,itl,e2el",
    ),
    Lie("vllm-duplicated-row", VL, "inf", _with(VL, _dup_row), "again"),
    Lie("vllm-run-line-twice", VL, "inf", _twice(VL), "the same run line twice"),
    Lie(
        "vllm-e2e-under-ttft",
        VL,
        "inf",
        _with(VL, _latency_under_ttft),
        "below its TTFT",
        vllm_metrics="ttft,itl",
    ),
    Lie(
        "vllm-peak-edited",
        VL,
        "inf",
        _set(VL, max_concurrent_requests=1),
        "max_concurrent_requests",
    ),
    # GuideLLM 0.8.1
    Lie(
        "guidellm-burst-as-synchronous",
        GL,
        "inf",
        _gl(
            lambda b: b["config"].update(
                strategy={"type_": "synchronous", "worker_count": 1, "max_concurrency": 1}
            )
        ),
        CONTRADICTED,
    ),
    Lie(
        "guidellm-e2e-rows-x1000",
        GL,
        "inf",
        _gl(_gl_requests(lambda r: r.update(request_latency=r["request_latency"] * 1000))),
        "request_latency",
    ),
    Lie(
        "guidellm-median-over-p99",
        GL,
        "inf",
        _gl(_gl_ttft_stat("median", 1.5)),
        "time_to_first_token_ms.successful.median",
    ),
    Lie(
        "guidellm-duration-x10",
        GL,
        "inf",
        _gl(lambda b: b.update(duration=b["duration"] * 10)),
        "requests_per_second",
    ),
    Lie(
        "guidellm-errored-dropped", GL, "inf", _gl(_gl_unerror), "request_totals.errored", failed=3
    ),
    Lie(
        "guidellm-p90-ttft",
        GL,
        "inf",
        _gl(_gl_ttft_stat("p90", 1.2)),
        "time_to_first_token_ms.successful.p90",
    ),
    Lie(
        "guidellm-tpot-mean",
        GL,
        "inf",
        _gl(lambda b: b["metrics"]["time_per_output_token_ms"]["successful"].update(mean=1.0)),
        "time_per_output_token_ms",
    ),
    Lie(
        "guidellm-itl-p99",
        GL,
        "inf",
        _gl(
            lambda b: b["metrics"]["inter_token_latency_ms"]["successful"]["percentiles"].update(
                p99=1e-3
            )
        ),
        "inter_token_latency_ms",
    ),
    Lie("guidellm-duplicated-request", GL, "inf", _gl(_gl_dup), "appears twice"),
    Lie(
        "guidellm-e2e-under-ttft",
        GL,
        "inf",
        _gl(lambda b: b["requests"]["successful"][0].update(request_latency=1e-4)),
        "request_latency",
    ),
    # AIPerf 0.13: the summary export
    Lie("aiperf-median-over-p99", AI, "inf", _ai(_ai_median_over_p99), "percentiles cannot fall"),
    Lie(
        "aiperf-e2e-unit-relabelled",
        AI,
        "inf",
        _ai(_unit("request_latency", "sec")),
        "longer than the whole benchmark",
    ),
    Lie("aiperf-ttft-over-e2e", AI, "inf", _ai(_ai_ttft_over_e2e), "E2E >= TTFT"),
    Lie(
        "aiperf-duration-x10",
        AI,
        "inf",
        _ai(_scale_in("benchmark_duration", "avg", 10)),
        "request_throughput",
    ),
    Lie(
        "aiperf-errors-dropped", AI, "inf", _ai(_ai_errors_dropped), "request_error_rate", failed=3
    ),
    Lie(
        "aiperf-burst-as-c1",
        AI,
        "inf",
        _ai(lambda ex: ex["input_config"]["phases"][0].update(concurrency=1)),
        CONTRADICTED,
    ),
    Lie("aiperf-phases-removed", AI, "c1", _ai(_ai_no_phases), UNRECORDED, ab=True),
    # AIPerf 0.13: the per-request records with the export beside them
    Lie(
        "aiperf-record-ttft-x1000",
        AR,
        "inf",
        _rec_metric("time_to_first_token", 1000),
        "time_to_first_token",
    ),
    Lie(
        "aiperf-record-unit-relabelled",
        AR,
        "inf",
        _rec_metric("time_to_first_token", 1.0, "s"),
        "time_to_first_token",
    ),
    Lie("aiperf-record-duplicated", AR, "inf", _rec_dup, "again"),
    Lie("aiperf-record-e2e-under-ttft", AR, "inf", _rec(_rec_e2e_under_ttft), "request_latency"),
    Lie("aiperf-records-burst-as-c1", AR, "inf", _ai_burst_as_c1, CONTRADICTED),
    Lie("aiperf-records-without-export", AR, "c1", _records_alone, UNRECORDED, ab=True),
]


def _gl_benchmark_twice(files: Files) -> None:
    b = files[fx.NAMES[GL]]["benchmarks"]
    b.append(json.loads(json.dumps(b[0])))


def _gl_e2e_p99(b: dict[str, Any]) -> None:
    b["metrics"]["request_latency"]["successful"]["percentiles"]["p99"] *= 1.5


def _ex_ttft_p90(ex: dict[str, Any]) -> None:
    s = ex["time_to_first_token"]  # moved towards the median: still in order, not the rows'
    s["p90"] = (s["p50"] + s["p90"]) / 2


def _gl_errored_all_dropped(b: dict[str, Any]) -> None:
    b["requests"]["errored"] = []
    b["metrics"]["request_totals"]["errored"] = 0  # the total (12) kept


def _ex_phase_drop(key: str) -> Callable[[dict[str, Any]], None]:
    def f(ex: dict[str, Any]) -> None:
        ex["input_config"]["phases"][0].pop(key)

    return f


def _ex_failures_zeroed(ex: dict[str, Any]) -> None:
    ex.pop("error_request_count")
    ex["error_summary"] = []
    ex["request_error_rate"]["avg"] = 0.0


LIES += [
    Lie("guidellm-benchmark-twice", GL, "inf", _gl_benchmark_twice, "the same run line"),
    Lie(
        "guidellm-concurrency-removed",
        GL,
        "inf",
        _gl(lambda b: b["config"]["strategy"].pop("max_concurrency")),
        UNRECORDED,
        ab=True,
    ),
    Lie(
        "guidellm-errored-all-dropped",
        GL,
        "inf",
        _gl(_gl_errored_all_dropped),
        "request_totals.total",
        failed=3,
    ),
    Lie(
        "aiperf-concurrency-removed",
        AI,
        "c1",
        _ai(_ex_phase_drop("concurrency")),
        UNRECORDED,
        ab=True,
    ),
    Lie("aiperf-rate-removed", AI, "4", _ai(_ex_phase_drop("rate")), UNRECORDED, ab=True),
    Lie("vllm-summary-burst-as-c1", VLS, "inf", _set(VLS, max_concurrency=1), CONTRADICTED),
    Lie(
        "guidellm-rate-removed",
        GL,
        "4",
        _gl(lambda b: b["config"]["strategy"].pop("rate")),
        UNRECORDED,
        ab=True,
    ),
    Lie("guidellm-p99-e2e", GL, "inf", _gl(_gl_e2e_p99), "request_latency.successful.p99"),
    Lie(
        "aiperf-record-e2e-x1000",
        AR,
        "inf",
        _rec_metric("request_latency", 1000),
        "request_latency",
    ),
    Lie(
        "aiperf-records-p90-ttft", AR, "inf", _ai(_ex_ttft_p90, "export"), "time_to_first_token.p90"
    ),
    Lie(
        "aiperf-records-tpot-mean",
        AR,
        "inf",
        _ai(_scale_in("inter_token_latency", "avg", 0.5), "export"),
        "inter_token_latency.avg",
    ),
    Lie(
        "aiperf-records-failures-hidden",
        AR,
        "inf",
        _ai(_ex_failures_zeroed, "export"),
        "error_summary",
        failed=3,
    ),
]
