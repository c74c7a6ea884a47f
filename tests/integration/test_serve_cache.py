"""serve-ab with half of the trace's images repeated: sglang-0.5.23's preprocess cache (one
per producer) hits them, its report counts the hits and misses and the feature hash's
bytes; pr-33921 has no cache. Without repeats every image of the trace is distinct, even
though the payloads cycle (``LoadJob.slots``). Over HTTP, the emulator's caches are emptied
after the warm-up, before each measured trace (``/flush_cache``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kimi_bench.bench.launch_runs import run_serve_on
from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.engine.launch import World
from kimi_bench.engine.serve_job import LoadJob
from kimi_bench.options import ServeOptions


def test_slots_keep_cycled_payloads_distinct_and_repeat_seeded() -> None:
    load = LoadJob(arrivals=(0.0,) * 7, warmup_requests=1, request_timeout_s=1.0,
                   resolution=(8, 8), images_per_request=2, image_format="jpeg",
                   image_content="random", unique_images=3, seed=5, repeat_share=0.0)  # fmt: skip
    legacy = LoadJob(**{**vars(load), "repeat_share": None})
    assert legacy.slots(2) == [(1, None), (2, None)]  # the payloads in turn, by their bytes
    slots = [s for rid in range(load.total) for s in load.slots(rid)]
    assert [i for _, i in slots] == list(range(16))  # every image distinct
    assert [p for p, _ in slots] == [i % 3 for i in range(16)]  # the payloads cycle
    half = LoadJob(**{**vars(load), "repeat_share": 0.5})
    got = [s for rid in range(half.total) for s in half.slots(rid)]
    assert len({i for _, i in got}) == 8  # half of the 16 repeat an earlier image
    assert all(p == i % 3 for p, i in got)  # a repeat carries its original's payload


def _opts(runtime: str) -> ServeOptions:
    return ServeOptions(rates=(float("inf"),), requests=4, ranks=2, processor_workers=1,
                        images_per_request=2, resolution=(96, 64), warmup_requests=0,
                        device="cpu", runtime=runtime, repeat_share=0.5)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["sglang-0.5.23", "pr-33921"])
def test_repeats_hit_under_0_5_23_and_not_under_the_pr(runtime: str) -> None:
    opts = _opts(runtime)
    runs = run_serve_on(World(), opts)  # the in-process pipeline (torchrun's path)
    report = build_serve_report(opts, runs, torch.device("cpu"), None)
    got = report.summary["hash_and_cache"]
    for arm in ("eager", "deferred"):
        c = got[f"inf/{arm}"]
        if runtime == "pr-33921":
            assert c["cache_hits"] is None and c["feature_hashes"] == 8
        else:  # 8 images, 4 repeats of an earlier one, one producer: 4 hits
            assert (c["cache_hits"], c["cache_misses"]) == (4, 4)
            assert c["feature_hashes"] == 4 and c["cache_reused_bytes"] > 0


@pytest.mark.slow
def test_over_http_each_measured_trace_starts_with_the_emulators_cache_empty(
    tmp_path: Path,
) -> None:
    """One emulator server serves every rate of its arm, the warm-up first: without a flush
    the warm-up's images and, at the second rate, every image of the (same) workload
    would be hits. serve-ab empties its producers' caches (``/flush_cache``) after the
    warm-up, before each measured trace, so both rates hit only the trace's own repeats."""
    exe = shutil.which("kimi-bench")
    out = tmp_path / "out"
    cmd = [*([exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]), "serve-ab",
           "--runtime", "sglang-0.5.23", "--arms", "eager", "--rates", "4,inf",
           "--num-prompts", "4", "--images-per-request", "2", "--repeat-share", "0.5",
           "--image-sizes", "96x64:1,64x96:1", "--warmup-requests", "1", "--ranks", "1",
           "--processor-workers", "1", "--request-timeout", "300", "--out", str(out)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    work = report["workload"]
    assert work["images"] == 8 and work["repeated_images"] == 4
    got = report["summary"]["hash_and_cache"]
    hits = [got[f"{rate}/eager"]["cache_hits"] for rate in ("4", "inf")]
    misses = [got[f"{rate}/eager"]["cache_misses"] for rate in ("4", "inf")]
    # the same cold start at both rates: the same hits, only repeats of the trace's own
    # earlier requests (a repeat within one request is decoded once, not looked up)
    assert hits[0] == hits[1] and 1 <= hits[0] <= work["repeated_images"]
    assert [h + m for h, m in zip(hits, misses, strict=True)] == [8, 8]
    assert report["config"]["arm_sources"]["eager"]["cache_flushes"] == ["ok", "ok"]
    assert any(n.startswith("eager: server caches flushed") for n in report["notes"])
