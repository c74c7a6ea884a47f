"""GPU-only: the zero-copy arm's registered-memory path (``cudaHostRegister`` of the
arena, asynchronous H2D straight from a slot, the permute on the device) and its bit
exactness against eager on CUDA. Run with ``pytest -m gpu`` on a CUDA machine."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import plan_resize
from kimi_bench.pipeline import (
    decide,
    held_slots,
    make_step,
    produce_zero_copy,
    rank_step,
    release_slots,
    run_eager,
    serialize,
)
from kimi_bench.pipeline.arena import Arena
from kimi_bench.pipeline.arena_layout import spec_for
from kimi_bench.pipeline.transport import list_segments, new_prefix

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
K3 = get_preset("kimi-k3")


def _images() -> list[Image.Image]:
    rng = np.random.default_rng(11)
    rgb = [Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)) for _ in range(2)]
    rgba = Image.fromarray(rng.integers(0, 256, (300, 200, 4), dtype=np.uint8), "RGBA")
    return [*rgb, rgba]


def test_registered_arena_is_page_locked_and_unregistered_on_close():
    prefix = new_prefix()
    spec = spec_for([(640, 480)], ranks=1, requests=2)
    with Arena.attach(prefix, spec, writer=0), Arena.attach(prefix, spec, rank=0) as rank:
        assert not rank.region(0, 0, 4096).is_pinned()
        ms = rank.register_cuda()
        assert ms > 0 and rank.registered and rank.setup()["register_ms"] == ms
        assert rank.region(1, 0, 4096).is_pinned()  # page-locked: the GPU reads it by DMA
        assert rank.register_cuda() == ms  # once per rank
        rank.unregister_cuda()
        assert not rank.region(0, 0, 4096).is_pinned()
    assert list_segments(prefix) == []


@pytest.mark.parametrize("ranks", [1, 2])
def test_owner_copies_from_registered_slots_bit_exact_with_eager(ranks):
    images = _images()
    plans = [plan_resize(*im.size, K3) for im in images]
    prefix = new_prefix()
    spec = spec_for([im.size for im in images], ranks=ranks, requests=2)
    writer = Arena.attach(prefix, spec, writer=0)
    arenas = [Arena.attach(prefix, spec, rank=r) for r in range(ranks)]
    try:
        for a in arenas:
            a.register_cuda()
        step = make_step("zero-copy", K3, CUDA, arena=writer)
        items = produce_zero_copy(step, images, plans, decide(step, images, plans))
        blob = serialize(step, items, "serialize", "send_pyobj")
        bf16: dict[int, torch.Tensor] = {}
        for r, arena in enumerate(arenas):
            rs = make_step("zero-copy", K3, CUDA, ledger=Ledger(), arena=arena)
            mine = pickle.loads(blob)
            held = held_slots(mine)
            out = rank_step(rs, mine, r, ranks)
            release_slots(rs, held)  # waits for this rank's copies first
            assert all("page-locked" in x["mirrors"] for x in rs.ledger.rows())
            if out.tower is not None and out.batch is not None:
                assert out.tower.device.type == "cuda"
                split = torch.split(out.tower, out.batch.patch_counts())
                bf16 |= dict(zip(out.mine, split, strict=True))
        assert writer.is_free(0) and writer.is_free(1)
        eager = run_eager(images, plans, K3, ranks, CUDA, CUDA)
        for i in range(len(images)):  # BF16 tower input, torch.equal
            assert torch.equal(bf16[i].cpu(), eager.bf16[i]), i
    finally:
        for a in [writer, *arenas]:
            a.close()
    assert list_segments(prefix) == []


@pytest.mark.slow
def test_micro_zero_copy_on_cuda_registers_every_rank_and_is_bit_exact():
    from kimi_bench.engine.procs import Harness
    from tests.integration.test_zero_copy import _job, drive_micro

    harness = Harness()
    job = _job(harness, ((2, 640, 480),), ("eager", "zero-copy"), device="cuda")
    try:
        res = drive_micro(harness, job)
    finally:
        harness.stop()
    assert list_segments(harness.prefix) == []
    setup = res["floor"]["zero_copy_setup"]
    assert all(s["registered"] and s["register_ms"] > 0 for s in setup)
    exact = [all(r["bit_exact"] for r in p["ranks"]) for p in res["repeats"] if p["arm"] != "eager"]
    assert exact == [True, True]
