"""Peers' result files written by the tests, per tool and version, in each tool's own
layout with each tool's own summary arithmetic (read from its source: sglang.bench_serving
0.5.23 ``sglang/benchmark/serving.py``, vllm bench serve 0.33.0 ``vllm/benchmarks/
serve.py``, GuideLLM 0.8.1 ``schemas/base/statistics.py``, AIPerf 0.13 ``metrics/
metric_dicts.py``), from one synthetic set of requests; and one-lie variants of them.

The arithmetic here is written independently of ``kimi_bench.peers`` (numpy for the tools
that use it, a plain weighted cumulative walk for GuideLLM), so an honest file imports
because kimi-bench reads each tool right, not because both sides share a function.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class Req:
    start: float  # s from the benchmark's start
    ttft: float  # s
    gaps: list[float]  # s between chunks after the first
    tail: float  # s from the last chunk to the stream's end
    input_len: int
    error: str | None = None

    @property
    def output_len(self) -> int:
        return 0 if self.error else len(self.gaps) + 1

    @property
    def latency(self) -> float:
        return 0.0 if self.error else self.ttft + sum(self.gaps) + self.tail

    @property
    def end(self) -> float:
        return self.start + (self.latency if not self.error else 0.05)


@dataclass
class Run:
    reqs: list[Req]
    rate: float  # inf: unpaced
    concurrency: int | None
    burstiness: float = 1.0

    @property
    def ok(self) -> list[Req]:
        return [r for r in self.reqs if r.error is None]

    @property
    def duration(self) -> float:
        return max(r.end for r in self.reqs) + 0.002


def make_run(load: str = "inf", n: int = 12, failed: int = 0, seed: int = 1) -> Run:
    """``load``: ``inf`` (all at once), ``c1`` (one in flight), ``4`` (4 req/s)."""
    rng = random.Random(seed)
    rate, conc = math.inf, None
    if load == "c1":
        conc = 1
    elif load != "inf":
        rate = float(load)
    reqs, t = [], 0.0
    for i in range(n):
        k = rng.randint(1, 6)
        ttft = 0.05 + rng.random() * (0.4 if load == "inf" else 0.05)
        gaps = [0.002 + rng.random() * 0.01 for _ in range(k - 1)]
        start = 0.0 if load == "inf" else (t if load == "c1" else i / rate)
        err = "Server disconnected" if i >= n - failed else None
        r = Req(start, ttft, gaps, 0.0005 + rng.random() * 0.001, 8 + rng.randint(0, 8), err)
        reqs.append(r)
        t = r.end + 0.001
    return Run(reqs, rate, conc)


def _np(xs: list[float], stat: str) -> float:
    arr = np.asarray(xs or [0.0], dtype=np.float64)
    if stat == "mean":
        return float(np.mean(arr))
    if stat == "median":
        return float(np.median(arr))
    if stat == "std":
        return float(np.std(arr))
    return float(np.percentile(arr, float(stat[1:])))


def _bucket_peak(run: Run) -> int:
    ok = run.ok
    t0 = min(r.start for r in ok)
    n = int(np.ceil(max(r.start + r.latency for r in ok) - t0)) + 1
    counts = np.zeros(n)
    for r in ok:
        for sec in range(int(r.start - t0), min(int(r.start + r.latency - t0) + 1, n)):
            counts[sec] += 1
    return int(np.max(counts))


def _tpots(run: Run) -> list[float]:
    return [(r.latency - r.ttft) / (r.output_len - 1) for r in run.ok if r.output_len > 1]


# ------------------------------------------------------------------------------- sglang


def sglang(run: Run, details: bool = True) -> dict[str, Any]:
    """One line of ``python -m sglang.bench_serving --output-file X [--output-details]``."""
    ok, dur = run.ok, run.duration
    ms = {
        "ttft": [r.ttft for r in ok],
        "itl": [g for r in ok for g in r.gaps],
        "tpot": _tpots(run),
        "e2e_latency": [r.latency for r in ok],
    }
    out_tokens = sum(r.output_len for r in ok)
    in_tokens = sum(r.input_len for r in ok)
    obj: dict[str, Any] = {
        "tag": None,
        "backend": "sglang-oai-chat",
        "dataset_name": "random-ids",
        "request_rate": run.rate,
        "max_concurrency": run.concurrency,
        "sharegpt_output_len": None,
        "random_input_len": 16,
        "random_output_len": 6,
        "random_range_ratio": 0.0,
        "server_info": None,
        "duration": dur,
        "completed": len(ok),
        "total_input_tokens": in_tokens,
        "total_input_text_tokens": in_tokens,
        "total_input_vision_tokens": 0,
        "total_output_tokens": out_tokens,
        "total_output_tokens_retokenized": out_tokens,
        "request_throughput": len(ok) / dur,
        "input_throughput": in_tokens / dur,
        "output_throughput": out_tokens / dur,
        "total_throughput": (in_tokens + out_tokens) / dur,
    }
    for metric in ("e2e_latency", "ttft", "tpot", "itl"):
        for stat in ("mean", "median", "std", "p90", "p95", "p99"):
            obj[f"{stat}_{metric}_ms"] = _np(ms[metric], stat) * 1000
    obj |= {
        "concurrency": float(np.sum(ms["e2e_latency"])) / dur,
        "accept_length": None,
        "max_output_tokens_per_s": 0.0,
        "max_concurrent_requests": _bucket_peak(run),
    }
    if details:
        obj |= {
            "input_lens": [r.input_len for r in run.reqs],
            "output_lens": [r.output_len for r in run.reqs],
            "ttfts": [0.0 if r.error else r.ttft for r in run.reqs],
            "itls": [[] if r.error else list(r.gaps) for r in run.reqs],
            "generated_texts": ["" if r.error else " t" * r.output_len for r in run.reqs],
            "errors": [r.error or "" for r in run.reqs],
        }
    return obj


# --------------------------------------------------------------------------------- vLLM


def vllm(
    run: Run, detailed: bool = True, metrics: str = "ttft,tpot,itl", percentiles: str = "99"
) -> dict[str, Any]:
    """``vllm bench serve --save-result [--save-detailed]`` (``--percentile-metrics``,
    ``--metric-percentiles`` as given; vLLM's defaults)."""
    ok, dur = run.ok, run.duration
    t0 = 1796108600.0
    out_lens = [r.output_len for r in run.reqs]
    obj: dict[str, Any] = {
        "date": "20261204-100000",
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": None,
        "model_id": "m",
        "tokenizer_id": "tok",
        "num_prompts": len(run.reqs),
        "request_rate": run.rate if math.isfinite(run.rate) else "inf",
        "burstiness": run.burstiness,
        "max_concurrency": run.concurrency,
        "duration": dur,
        "completed": len(ok),
        "failed": len(run.reqs) - len(ok),
        "total_input_tokens": sum(r.input_len for r in ok),
        "total_output_tokens": sum(out_lens),
        "request_throughput": len(ok) / dur,
        "request_goodput": None,
        "output_throughput": sum(out_lens) / dur,
        "total_token_throughput": (sum(r.input_len for r in ok) + sum(out_lens)) / dur,
        "input_lens": [r.input_len for r in run.reqs],
        "output_lens": out_lens,
        "ttfts": [0.0 if r.error else r.ttft for r in run.reqs],
        "itls": [[] if r.error else list(r.gaps) for r in run.reqs],
        "latencies": [r.latency for r in run.reqs],
        "start_times": [t0 + r.start for r in run.reqs],
        "queue_times": [0.0 for _ in run.reqs],
        "generated_texts": ["" if r.error else " t" * r.output_len for r in run.reqs],
        "errors": [r.error or "" for r in run.reqs],
        "max_output_tokens_per_s": 0.0,
        "max_concurrent_requests": _bucket_peak(run),
        "rtfx": 0.0,
    }
    if not detailed:
        for key in (
            "input_lens",
            "output_lens",
            "start_times",
            "ttfts",
            "itls",
            "generated_texts",
            "errors",
        ):
            del obj[key]
    values = {
        "ttft": [r.ttft for r in ok],
        "tpot": _tpots(run),
        "itl": [g for r in ok for g in r.gaps],
        "e2el": [r.latency for r in ok],
    }
    for metric in metrics.split(","):
        for stat in ("mean", "median", "std"):
            obj[f"{stat}_{metric}_ms"] = _np(values[metric], stat) * 1000
        for p in percentiles.split(","):
            word = str(int(float(p))) if float(p) == int(float(p)) else p
            obj[f"p{word}_{metric}_ms"] = _np(values[metric], f"p{p}") * 1000
    return obj


# -------------------------------------------------------------------------------- files


def dump(objs: dict[str, Any] | list[dict[str, Any]], path: Path) -> Path:
    """One object, or JSON Lines (the tools write ``Infinity`` for an unlimited rate)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = objs if isinstance(objs, list) else [objs]
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return path


def honest(tool: str, run: Run) -> dict[str, Any] | list[dict[str, Any]]:
    """The object(s) ``tool`` writes for ``run``: sglang, sglang-summary, vllm,
    vllm-summary, guidellm, aiperf (the export), aiperf-records."""
    from tests.peers import fixtures_tools as ft

    makers = {
        "sglang": lambda: sglang(run),
        "sglang-summary": lambda: sglang(run, details=False),
        "vllm": lambda: vllm(run),
        "vllm-summary": lambda: vllm(run, detailed=False),
        "guidellm": lambda: ft.guidellm(run),
        "aiperf": lambda: ft.aiperf_export(run),
        "aiperf-records": lambda: ft.aiperf_records(run),
    }
    return makers[tool]()


NAMES = {
    "sglang": "sglang.jsonl",
    "sglang-summary": "sglang-summary.jsonl",
    "vllm": "vllm.json",
    "vllm-summary": "vllm-summary.json",
    "guidellm": "guidellm.json",
    "aiperf": "profile_export_aiperf.json",
    "aiperf-records": "profile_export.jsonl",
}


def write(tool: str, run: Run, folder: Path, obj: Any = None) -> Path:
    """``tool``'s file for ``run`` (or ``obj``, an edited copy) in ``folder`` under the
    tool's own name; AIPerf's records get the export beside them, as AIPerf writes both."""
    if tool == "aiperf-records":
        dump(honest("aiperf", run), folder / NAMES["aiperf"])
    return dump(obj if obj is not None else honest(tool, run), folder / NAMES[tool])
