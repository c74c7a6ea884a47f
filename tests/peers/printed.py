"""What each tool prints for a run, read from its own file the way a user reads the tool's
summary (its own keys, its own units), written apart from ``kimi_bench.peers`` so that a
test comparing an imported report against it does not share the importer's reading.

``printed(tool, path)``: ``{"ttft_median": ms, ..., "req_per_s": r}`` for the TTFT, ITL,
TPOT and E2E mean/median/p90/p99 the tool states (a statistic it does not state is
absent) and its request throughput."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STATS = ("mean", "median", "p90", "p99")
METRICS = ("ttft", "itl", "tpot", "e2e")
DIGITS = 2  # every tool prints its latency and throughput summary with 2 decimals

# the tool's name of each kimi-bench metric
_SGLANG = {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e": "e2e_latency"}
_VLLM = {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e": "e2el"}
_GUIDELLM = {
    "ttft": ("time_to_first_token_ms", 1.0),
    "itl": ("inter_token_latency_ms", 1.0),
    "tpot": ("time_per_output_token_ms", 1.0),
    "e2e": ("request_latency", 1e3),  # seconds
}
_AIPERF = {
    "ttft": "time_to_first_token",
    "itl": "inter_chunk_latency",
    "tpot": "inter_token_latency",
    "e2e": "request_latency",
}
_AIPERF_STAT = {"mean": "avg", "median": "p50", "p90": "p90", "p99": "p99"}
_UNIT_MS = {"ms": 1.0, "sec": 1e3, "s": 1e3}


def _first(path: Path) -> dict[str, Any]:
    text = path.read_text()
    obj: dict[str, Any] = json.loads(text.splitlines()[0] if path.suffix == ".jsonl" else text)
    return obj


def _serving(obj: dict[str, Any], names: dict[str, str]) -> dict[str, float]:
    out = {}
    for metric, name in names.items():
        for stat in STATS:
            v = obj.get(f"{stat}_{name}_ms")
            if v is not None:
                out[f"{metric}_{stat}"] = float(v)
    out["req_per_s"] = float(obj["request_throughput"])
    return out


def _guidellm(obj: dict[str, Any]) -> dict[str, float]:
    metrics = obj["benchmarks"][0]["metrics"]
    out = {}
    for metric, (name, scale) in _GUIDELLM.items():
        s = metrics[name]["successful"]
        for stat in STATS:
            v = s[stat] if stat in ("mean", "median") else s["percentiles"][stat]
            out[f"{metric}_{stat}"] = float(v) * scale
    out["req_per_s"] = float(metrics["requests_per_second"]["successful"]["mean"])
    return out


def _aiperf(ex: dict[str, Any]) -> dict[str, float]:
    out = {}
    for metric, name in _AIPERF.items():
        block = ex[name]
        for stat in STATS:
            out[f"{metric}_{stat}"] = float(block[_AIPERF_STAT[stat]]) * _UNIT_MS[block["unit"]]
    out["req_per_s"] = float(ex["request_throughput"]["avg"])
    return out


def printed(tool: str, path: Path) -> dict[str, float]:
    """``tool``: a tests.peers.fixtures tool name (sglang, sglang-summary, vllm, ...)."""
    if tool.startswith("sglang"):
        return _serving(_first(path), _SGLANG)
    if tool.startswith("vllm"):
        return _serving(_first(path), _VLLM)
    if tool == "guidellm":
        return _guidellm(_first(path))
    # AIPerf: the summary is the export (beside the records)
    return _aiperf(_first(path.parent / "profile_export_aiperf.json"))
