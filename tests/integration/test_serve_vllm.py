"""serve-ab under the ``vllm-0.33`` profile, on the CPU: requests go through vLLM's arm and
carrier in the emulated pipeline (the API server's uint8 patches, msgpack/ZMQ to EngineCore,
the ``MessageQueue`` to every rank, pinned staging + H2D on every rank), every request is
answered and the report names the runtime and counts vLLM's copies."""

from __future__ import annotations

import pytest
import torch

from kimi_bench.bench.launch_runs import run_serve_on
from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.navit import plan_resize
from kimi_bench.engine.launch import World
from kimi_bench.options import ServeOptions


@pytest.mark.slow
def test_serve_ab_runs_the_vllm_profile_on_cpu() -> None:
    opts = ServeOptions(rates=(float("inf"),), requests=4, ranks=2, processor_workers=1,
                        images_per_request=2, resolution=(96, 64), warmup_requests=0,
                        device="cpu", runtime="vllm-0.33")  # fmt: skip
    assert (opts.arms, opts.transport) == (("vllm-uint8",), "vllm-mq")
    runs = run_serve_on(World(), opts)  # the in-process pipeline (torchrun's path)
    report = build_serve_report(opts, runs, torch.device("cpu"), None)
    assert report.config["runtime_profile"]["name"] == "vllm-0.33"
    assert report.config["carrier_traits"]["name"] == "vllm-mq"
    assert [r.error for run in runs for r in run.records] == [None] * 4
    rows = [c for c in report.data["copies"] if c["arm"] == "vllm-uint8"]
    ops: dict[tuple[str, str], list[int]] = {}
    for c in rows:  # one row per (stage, op, place, function); summed over the run
        got = ops.setdefault((c["stage"], c["op"]), [0, 0])
        got[0], got[1] = got[0] + c["bytes"], got[1] + c["count"]
    plan = plan_resize(96, 64, get_preset("kimi-k3"))
    patches = 8 * 3 * plan.padded_width * plan.padded_height  # 4 requests x 2 images
    assert ops[("producer", "patchify")] == [patches, 8]
    assert ops[("serialize", "oob_frame")] == [patches, 8]  # out of band, no copy
    assert ops[("pre_embed_move", "pinned_staging")][0] == 2 * patches  # every rank, every item
    assert ops[("pre_embed_move", "h2d")][0] == 2 * patches
    ring_in, ring_out = ops[("broadcast", "ring_copy_in")], ops[("broadcast", "ring_copy_out")]
    assert ring_out == [2 * ring_in[0], 2 * ring_in[1]]  # each message out once per reader
    assert ("broadcast", "zmq_delivery") not in ops  # small messages: the ring
