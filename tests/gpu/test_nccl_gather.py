"""GPU-only, two GPUs: the encoder-output gather over NCCL (one GPU per rank), the
metadata-only fallback when two ranks share a GPU, and ``micro`` with the gather as a
stage. Run with ``pytest -m gpu`` on a machine with at least two CUDA devices."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as tmp

from kimi_bench.engine.launch import device_group, join_gloo
from tests.integration.test_gather import check_cases

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices"),
]
for _k, _v in (
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
):
    os.environ.setdefault(_k, _v)


def _worker(rank: int, world: int, init: str, share_gpu: bool) -> None:
    dev = torch.device("cuda", 0 if share_gpu else rank)
    torch.cuda.set_device(dev)
    join_gloo(init, rank, world)
    try:
        group = device_group(dev, world)
        if share_gpu:
            assert group is None  # ranks share a GPU: metadata only
            return
        assert group is not None and dist.get_backend(group) == "nccl"
        check_cases(rank, world, dev, group, "nccl")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("share_gpu", [False, True])
def test_nccl_gather_equals_in_order_concatenation(share_gpu):
    with tempfile.TemporaryDirectory() as d:
        tmp.spawn(_worker, args=(2, str(Path(d) / "rdzv"), share_gpu), nprocs=2, join=True)


def test_micro_two_gpus_times_the_nccl_gather():
    from kimi_bench.bench.micro import run_micro
    from kimi_bench.options import MicroOptions

    report = run_micro(
        MicroOptions(
            synthetic="2x640x480,1x320x240",
            ranks=2,
            repeats=3,
            warmup=1,
            device="cuda",
            transport="shm",
            launches=1,
        )
    )
    assert report.summary["bit_exact_all_repeats"] is True  # owner and gathered outputs
    for arm in ("eager", "deferred"):
        stage = report.data["arms"][arm]["stages"]["gather"]
        assert stage["bytes"] > 0 and len(stage["samples_ms"]) == 3
        ops = {c["op"] for c in report.data["arms"][arm]["copies"] if c["stage"] == "gather"}
        assert ops == {"nccl_all_gather"}
