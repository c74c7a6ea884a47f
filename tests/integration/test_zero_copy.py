"""The zero-copy arm (proposed, not in the runtime): the arena's slot ring, the producer's
single copy per image, owner-only reads, bit exactness against eager, and clean-up of the
run's arena after normal exit, a failing worker, Ctrl-C and SIGTERM."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.bench.micro_build import stage_record as _stage_record
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.pixels import stage_input
from kimi_bench.domain.runtime import DEFAULT_RUNTIME
from kimi_bench.engine.micro_job import MicroJob
from kimi_bench.engine.micro_worker import producer_main, rank_main
from kimi_bench.engine.procs import Harness, WorkerFailed
from kimi_bench.infra.fault_hooks import NO_FAULTS
from kimi_bench.options import Arm
from kimi_bench.pipeline import (
    arena_to_device,
    carrier,
    decide,
    held_slots,
    make_step,
    produce_zero_copy,
    rank_step,
    release_slots,
    run_eager,
    serialize,
    stage_into_arena,
)
from kimi_bench.pipeline.arena import Arena
from kimi_bench.pipeline.arena_layout import ArenaError, ArenaFull, ArenaSpec, spec_for
from kimi_bench.pipeline.transport import list_segments, new_prefix
from tests.conftest import popen_kw
from tests.faults import CrashAtRepeat, CrashBeforeAttach

K3 = get_preset("kimi-k3")
K25 = get_preset("kimi-k2.5")
CPU = torch.device("cpu")
REPO = Path(__file__).resolve().parents[2]
SLOT = 64 * 48 * 4  # one 64x48 image in a slot: PIL's 4-byte pixels


def _rgb(w: int, h: int, seed: int) -> Image.Image:
    arr = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    return Image.fromarray(arr, "RGB")


@pytest.fixture
def prefix():
    p = new_prefix()
    yield p
    assert list_segments(p) == [], "the test left arena segments behind"


def _arenas(prefix: str, spec: ArenaSpec) -> tuple[Arena, list[Arena]]:
    writer = Arena.attach(prefix, spec, writer=0)
    return writer, [Arena.attach(prefix, spec, rank=r) for r in range(spec.ranks)]


def _close(*arenas: Arena) -> None:
    for a in arenas:
        a.close()


# ------------------------------------------------------------------------- the slot ring


def test_arm_is_listed():
    assert "zero-copy" in get_args(Arm)


def test_slots_are_reused_only_after_every_rank_released(prefix):
    spec = ArenaSpec(slots=2, slot_bytes=4096, ranks=2)
    writer, (r0, r1) = _arenas(prefix, spec)
    assert [writer.acquire(), writer.acquire()] == [0, 1]
    assert writer.generation(0) == 1
    with pytest.raises(ArenaFull, match=r"rank\(s\) \[0, 1\]"):
        writer.acquire(timeout_s=0.05)
    r0.release(0, 1)  # rank 0 is done with both slots; rank 1 is not yet
    r0.release(1, 1)
    with pytest.raises(ArenaFull, match=r"rank\(s\) \[1\]"):
        writer.acquire(timeout_s=0.05)
    r1.release(0, 1)
    assert writer.acquire(timeout_s=0.05) == 0  # reused, next generation
    assert writer.generation(0) == 2
    r0.release(0, 1)  # a stale release does not free the new content
    r1.release(0, 1)
    assert not writer.is_free(0)
    writer.abandon(0)  # a request that failed before its metadata left gives it back
    assert writer.is_free(0) and not writer.is_free(1)
    with pytest.raises(ArenaError, match="only a rank"):
        writer.release(0, 1)
    _close(writer, r0, r1)


def test_writers_own_disjoint_slots(prefix):
    spec = spec_for([(64, 48)], ranks=1, requests=5, writers=2)
    assert spec.slots == 6 and spec.slots % 2 == 0
    w0 = Arena.attach(prefix, spec, writer=0)
    w1 = Arena.attach(prefix, spec, writer=1)
    rank = Arena.attach(prefix, spec, rank=0)
    assert {w0.acquire() for _ in range(3)} == {0, 2, 4}
    assert {w1.acquire() for _ in range(3)} == {1, 3, 5}
    _close(w0, w1, rank)


def test_bytes_are_shared_and_the_name_goes_once_every_role_attached(prefix):
    spec = ArenaSpec(slots=2, slot_bytes=SLOT, ranks=2)
    writer = Arena.attach(prefix, spec, writer=0)
    r0 = Arena.attach(prefix, spec, rank=0)
    assert list_segments(prefix) == [f"{prefix}arena"]  # rank 1 has not mapped it yet
    r1 = Arena.attach(prefix, spec, rank=1)
    assert list_segments(prefix) == []  # unlinked: the mappings live on
    img = _rgb(64, 48, 1)
    writer.paste(1, 0, img)
    seen = r1.region(1, 0, SLOT).view(48, 64, 4)[:, :, :3]
    assert torch.equal(seen, torch.from_numpy(np.array(img)))
    _close(writer, r0, r1)


def test_a_different_geometry_is_refused(prefix):
    a = Arena.attach(prefix, ArenaSpec(slots=2, slot_bytes=4096, ranks=2), writer=0)
    for other in (ArenaSpec(4, 4096, 2), ArenaSpec(2, 4096, 3), ArenaSpec(2, 8192, 2)):
        with pytest.raises(ArenaError, match="geometry"):
            Arena.attach(prefix, other, rank=0)
    a.close()
    with (
        pytest.raises(ArenaError, match="only a writer"),
        Arena.attach(prefix, ArenaSpec(2, 4096, 1), rank=0) as r,
    ):
        r.acquire()


def test_a_request_larger_than_a_slot_is_refused_and_its_slot_given_back(prefix):
    spec = ArenaSpec(slots=2, slot_bytes=SLOT, ranks=1)
    writer, ranks = _arenas(prefix, spec)
    step = make_step("zero-copy", K3, CPU, arena=writer)
    with pytest.raises(ArenaError, match="arena slot holds"):
        stage_into_arena(step, [_rgb(64, 48, 0), _rgb(64, 48, 1)])
    assert writer.is_free(0) and writer.is_free(1)
    _close(writer, *ranks)


# ------------------------------------------------------------------ pixels, once each


def _inputs() -> list[Any]:
    """(name, preset, input, converted first): every kind of input the producer takes."""
    rng = np.random.default_rng(3)
    rgba = Image.fromarray(rng.integers(0, 256, (20, 30, 4), dtype=np.uint8), "RGBA")
    gray = Image.fromarray(rng.integers(0, 256, (21, 17), dtype=np.uint8), "L")
    pal = _rgb(25, 19, 4).convert("P")
    chw = torch.from_numpy(rng.integers(0, 256, (3, 16, 24), dtype=np.uint8))
    cases = [
        ("rgb", K3, _rgb(33, 27, 5), False),
        ("rgba-keeps-alpha-k3", K3, rgba, False),
        ("rgba-drops-alpha-k2.5", K25, rgba, False),
        ("gray", K3, gray, True),
        ("palette", K3, pal, True),
        ("chw-tensor", K3, chw, False),
        ("2d-tensor", K3, chw[0], False),
    ]
    return [pytest.param(*c, id=c[0]) for c in cases]


@pytest.mark.parametrize(("name", "cfg", "obj", "converted"), _inputs())
def test_every_input_lands_as_the_runtime_would_stage_it(prefix, name, cfg, obj, converted):
    spec = ArenaSpec(slots=1, slot_bytes=SLOT, ranks=1)
    writer, (rank,) = _arenas(prefix, spec)
    step = make_step("zero-copy", cfg, CPU, ledger=Ledger(), arena=writer)
    (ref,) = stage_into_arena(step, [obj])
    owner = make_step("zero-copy", cfg, CPU, arena=rank)
    got = arena_to_device(owner, ref)
    assert torch.equal(got, stage_input(obj, cfg)), name  # uint8, CHW
    ops = [(r["op"], r["count"]) for r in step.ledger.rows()]
    assert ("arena_copy_in", 1) in ops
    assert (("convert", 1) in ops) == converted
    del got
    _close(writer, rank)


# ------------------------------------------------- in one process: ledger and exactness


def _rank_outputs(
    blob: bytes, arenas: list[Arena], n_images: int
) -> tuple[dict[int, torch.Tensor], list[Ledger]]:
    """Every rank takes the broadcast metadata, runs its step and releases its slots."""
    bf16: dict[int, torch.Tensor] = {}
    ledgers = []
    for r, arena in enumerate(arenas):
        step = make_step("zero-copy", K3, CPU, ledger=Ledger(), arena=arena)
        items = pickle.loads(blob)
        held = held_slots(items)
        out = rank_step(step, items, r, len(arenas))
        release_slots(step, held)
        ledgers.append(step.ledger)
        if out.tower is not None and out.batch is not None:
            split = torch.split(out.tower, out.batch.patch_counts())
            for i, t in zip(out.mine, split, strict=True):
                bf16[i] = t
    assert len(bf16) <= n_images
    return bf16, ledgers


def test_two_images_two_ranks_ledger_and_bit_exact(prefix):
    images = [_rgb(64, 48, 0), _rgb(64, 48, 1)]
    plans = [plan_resize(64, 48, K3)] * 2
    spec = spec_for([im.size for im in images], ranks=2, requests=2)
    writer, ranks = _arenas(prefix, spec)
    step = make_step("zero-copy", K3, CPU, ledger=Ledger(), arena=writer)
    items = produce_zero_copy(step, images, plans, decide(step, images, plans))
    blob = serialize(step, carrier("shm").wrap(step, items, prefix), "serialize", "send_pyobj")
    assert len(blob) < 4096  # metadata only
    producer = [(r["stage"], r["op"], r["src"], r["dst"], r["count"]) for r in step.ledger.rows()]
    assert producer == [
        ("producer", "arena_copy_in", "pil", "shm", 2),  # one copy per image, nothing else
        ("serialize", "pickle", "host", "host", 1),
    ]
    assert step.ledger.copied_bytes("producer") == 2 * SLOT
    bf16, ledgers = _rank_outputs(blob, ranks, 2)
    for r, led in enumerate(ledgers):  # each rank copies its own image, once
        assert [(x["op"], x["src"], x["count"], x["bytes"]) for x in led.rows()] == [
            ("h2d", "shm", 1, SLOT)
        ], r
    eager = run_eager(images, plans, K3, 2, CPU, CPU)
    for i in range(2):  # BF16 tower input, torch.equal
        assert torch.equal(bf16[i], eager.bf16[i])
    assert all(writer.is_free(s) for s in range(spec.slots))
    _close(writer, *ranks)


def test_a_non_owner_never_touches_pixel_bytes(prefix, monkeypatch):
    images = [_rgb(64, 48, 7)]
    plans = [plan_resize(64, 48, K3)]
    spec = spec_for([(64, 48)], ranks=2, requests=2)
    writer, ranks = _arenas(prefix, spec)
    step = make_step("zero-copy", K3, CPU, arena=writer)
    items = produce_zero_copy(step, images, plans, decide(step, images, plans))
    blob = serialize(step, items, "serialize", "send_pyobj")
    reads: list[int] = []
    real_region = Arena.region

    def spy(self: Arena, slot: int, offset: int, nbytes: int) -> torch.Tensor:
        reads.append(self.role)
        return real_region(self, slot, offset, nbytes)

    monkeypatch.setattr(Arena, "region", spy)
    bf16, ledgers = _rank_outputs(blob, ranks, 1)
    assert set(bf16) == {0} and reads == [0]  # only rank 0 (the owner) read the slot
    assert ledgers[1].rows() == []  # rank 1 moved no byte at all
    assert ledgers[0].copied_bytes() == SLOT
    assert writer.is_free(0)  # both ranks released it
    _close(writer, *ranks)


# ------------------------------------------------------------- real processes (micro)


def _job(harness: Harness, groups: Any, arms: Any, **kw: Any) -> MicroJob:
    base: dict[str, Any] = dict(
        cfg=K3,
        groups=groups,
        content="random",
        seed=0,
        ranks=2,
        transport="shm",
        device="cpu",
        repeats=2,
        warmup=1,
        prefix=harness.prefix,
        init_file=harness.init_file,
        arms=tuple(arms),
        runtime=DEFAULT_RUNTIME,
        repeat_share=0.0,
        image_paths=(),
        ranks_per_node=0,
        control_repeats=0,
        hooks=NO_FAULTS,
        decoder="auto",
        baseline_whitelisted=False,
        profile_dir=None,
        profile_repeats=0,
        launch=0,
    )
    return MicroJob(**(base | kw))


def drive_micro(harness: Harness, job: MicroJob, timeout_s: float = 180) -> dict[str, Any]:
    """What ``run_micro`` does, with ``MicroJob.arms`` (``MicroOptions`` has no arms yet)."""
    out: dict[str, Any] = {"floor": None, "repeats": []}
    prod, rank0 = harness.pipe()
    harness.start("producer", producer_main, job, prod)
    for r in range(job.ranks):
        harness.start(f"rank{r}", rank_main, job, r, rank0 if r == 0 else None)
    for kind, payload in harness.messages(timeout_s):
        if kind == "floor":
            out["floor"] = payload
        elif payload["iteration"] >= job.warmup:
            out["repeats"].append(payload)
    return out


@pytest.mark.slow
def test_micro_three_arms_two_ranks_bit_exact_and_clean():
    harness = Harness()
    job = _job(harness, ((2, 64, 48),), get_args(Arm))
    try:
        res = drive_micro(harness, job)
    finally:
        removed = harness.stop()
    assert removed == [] and list_segments(harness.prefix) == []  # unlinked by the arm itself
    zc = [p for p in res["repeats"] if p["arm"] == "zero-copy"]
    assert len(zc) == 2
    for payload in zc:
        rec = _stage_record(payload)
        assert rec["bit_exact"] is True and rec["bit_exact_fp32"] is True
        assert rec["stage_bytes"]["take_copy"] == 0 and rec["stage_bytes"]["d2h"] == 0
        for r, rank in enumerate(payload["ranks"]):  # each rank: its own image, once
            h2d = [x for x in rank["ledger"] if x["op"] == "h2d"]
            assert [(x["count"], x["bytes"]) for x in h2d] == [(1, SLOT)], r
        ops = {(x["stage"], x["op"]): (x["count"], x["bytes"]) for x in rec["copies"]}
        assert ops[("producer", "arena_copy_in")] == (2, 2 * SLOT)
        pixel_ops = {"convert", "to_numpy", "hwc_to_chw", "shm_copy_in", "clone", "map"}
        assert not pixel_ops & {op for _, op in ops}
        assert all(b < 4096 for (s, op), (_, b) in ops.items() if op in ("pickle", "unpickle"))
    setup = res["floor"]["zero_copy_setup"]
    assert len(setup) == 2 and all(s["slots"] == 2 and not s["registered"] for s in setup)


@pytest.mark.slow
@pytest.mark.parametrize(
    "hooks",
    [CrashAtRepeat(0, rank=1), CrashBeforeAttach(1), CrashAtRepeat(0)],
    ids=["rank1-repeat0", "rank1-attach", "producer-repeat0"],
)
def test_a_failing_worker_leaves_no_segment(hooks):
    harness = Harness()
    job = _job(harness, ((1, 64, 48),), ("zero-copy",), hooks=hooks)
    try:
        with pytest.raises(WorkerFailed, match="injected fault"):
            drive_micro(harness, job)
    finally:
        harness.stop()
    assert list_segments(harness.prefix) == []


def _attach_and_crash(prefix: str, outbox: Any) -> None:
    Arena.attach(prefix, ArenaSpec(slots=2, slot_bytes=4096, ranks=2), writer=0)
    outbox.send("attached", prefix)
    raise RuntimeError("crash while the arena is mapped")


@pytest.mark.slow
def test_the_harness_removes_an_arena_a_crashed_worker_left():
    harness = Harness()
    try:
        harness.start("producer", _attach_and_crash, harness.prefix)
        with pytest.raises(WorkerFailed, match="crash while the arena is mapped"):
            for _ in harness.messages(60):
                assert list_segments(harness.prefix) == [f"{harness.prefix}arena"]
    finally:
        removed = harness.stop()
    assert removed == [f"{harness.prefix}arena"]
    assert list_segments(harness.prefix) == []


def _interruptible_main() -> None:
    """Run the zero-copy arm until interrupted (the subprocess of the test below)."""
    harness = Harness()
    print(harness.prefix, flush=True)
    job = _job(harness, ((1, 64, 48),), ("zero-copy",), repeats=100000, warmup=0)
    try:
        prod, rank0 = harness.pipe()
        harness.start("producer", producer_main, job, prod)
        for r in range(job.ranks):
            harness.start(f"rank{r}", rank_main, job, r, rank0 if r == 0 else None)
        for kind, _ in harness.messages(120):
            if kind == "repeat":
                print("repeat", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        harness.stop()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupt_leaves_no_segment_and_no_process(how):
    code = "from tests.integration.test_zero_copy import _interruptible_main as m; m()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **popen_kw,  # SIGINT is Ctrl-C in the child, whatever pytest inherited
    )
    assert proc.stdout is not None
    prefix = proc.stdout.readline().strip()
    assert prefix.startswith("kimibench_"), prefix
    deadline = time.time() + 120
    while time.time() < deadline and proc.stdout.readline().strip() != "repeat":
        pass
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
    else:
        proc.send_signal(signal.SIGTERM)  # e.g. a CI timeout, to the parent only
    rest, _ = proc.communicate(timeout=60)
    assert "interrupted" in rest, rest
    for _ in range(50):
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("worker processes outlived the run")
    assert list_segments(prefix) == []


# ------------------------------------------------------------------- serve-ab, third arm


@pytest.mark.slow
def test_serve_runs_the_zero_copy_arm_and_cleans_up():
    import math

    from kimi_bench.bench.serve import run_serve_ab
    from kimi_bench.options import ServeOptions

    opts = ServeOptions(
        rates=(math.inf,),
        requests=6,
        ranks=2,
        processor_workers=2,
        resolution=(96, 64),
        warmup_requests=1,
        device="cpu",
        arms=("zero-copy",),
    )
    (res,) = run_serve_ab(opts)
    assert res.error is None and res.leftover_segments == 0
    assert len(res.records) == 6 and all(r.error is None for r in res.records)
    ops: dict[str, int] = {}
    for c in res.copies or []:
        ops[c["op"]] = ops.get(c["op"], 0) + c["count"]
    assert ops["arena_copy_in"] == 6 and ops["h2d"] == 6  # measured requests: once each
    assert not {"convert", "to_numpy", "hwc_to_chw", "shm_copy_in", "map", "clone"} & set(ops)
