"""The encoder-output gather (``pipeline.gather``) with real tensors over a real process
group: here gloo on the CPU (the logic: padding, stripping, input order, the single-image
broadcast, a rank that owns nothing) and the clock offset between ranks;
``tests/gpu/test_nccl_gather.py`` runs the same cases over NCCL on two GPUs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as tmp

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import plan_resize
from kimi_bench.engine.images import make_images
from kimi_bench.engine.launch import clock_offset
from kimi_bench.pipeline import deferred_item, gather, make_step, rank_step

K3 = get_preset("kimi-k3")
# (count, width, height) groups: uneven sizes (padding), one image (broadcast), fewer
# images than ranks (a rank owns nothing)
CASES = (
    ((1, 96, 64), (2, 40, 30), (1, 200, 20)),
    ((1, 70, 50),),
    ((2, 33, 33),),
)


def _items(groups: tuple[tuple[int, int, int], ...]) -> list[Any]:
    images = make_images(groups, "random", 7)
    return [deferred_item(im, plan_resize(*im.size, K3), K3) for im in images]


def in_order_reference(groups: tuple[tuple[int, int, int], ...], world: int, dev: Any) -> Any:
    """Every rank's output computed here, split per image and concatenated in input
    order: what the gather must return (independent of its padding and stripping)."""
    per_image: dict[int, torch.Tensor] = {}
    for r in range(world):
        out = rank_step(make_step("deferred", K3, dev), _items(groups), r, world)
        if out.tower is None:
            continue
        counts = [out.sizes[i] for i in out.mine]
        for i, rows in zip(out.mine, torch.split(out.tower, counts), strict=True):
            per_image[i] = rows
    return torch.cat([per_image[i] for i in range(len(per_image))])


def check_cases(rank: int, world: int, dev: Any, group: Any, backend: str) -> None:
    """Run every case through rank_step + gather on this rank; compare (torch.equal, BF16)
    with the in-order concatenation and check the ledger's collective bytes."""
    for groups in CASES:
        step = make_step("deferred", K3, dev, ledger=Ledger())
        out = rank_step(step, _items(groups), rank, world)
        result = gather(step, out, rank, world, group)
        assert result is not None and result.dtype == torch.bfloat16
        assert torch.equal(result.cpu(), in_order_reference(groups, world, dev).cpu()), groups
        rows = [r for r in step.ledger.rows() if r["stage"] == "gather"]
        if len(out.sizes) == 1:
            owner = out.owners[0]
            expect = [f"{backend}_broadcast"] if rank == owner else []
            assert [r["op"] for r in rows] == expect
        else:
            longest = max(
                sum(out.sizes[i] for i, o in enumerate(out.owners) if o == r) for r in range(world)
            )
            row_bytes = 3 * K3.patch_size * K3.patch_size * 2
            assert [(r["op"], r["bytes"], r["count"]) for r in rows] == [
                (f"{backend}_all_gather", longest * row_bytes * (world - 1), world - 1)
            ]


def _worker(rank: int, world: int, init: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    try:
        # one host, one clock: the estimated offset to rank 0's clock is (nearly) zero
        assert abs(clock_offset(rank, world)) < 0.05
        check_cases(rank, world, torch.device("cpu"), dist.group.WORLD, "gloo")
        # no device group: metadata only, the ledger says so and nothing is returned
        step = make_step("deferred", K3, torch.device("cpu"), ledger=Ledger())
        out = rank_step(step, _items(CASES[0]), rank, world)
        assert gather(step, out, rank, world, None) is None
        rows = step.ledger.rows()
        assert [(r["op"], r["copies"]) for r in rows if r["stage"] == "gather"] == [
            ("gather_metadata", False)
        ]
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_gather_pads_strips_and_restores_order_over_gloo():
    with tempfile.TemporaryDirectory() as d:
        tmp.spawn(_worker, args=(3, str(Path(d) / "rdzv")), nprocs=3, join=True)
