"""The processes of ``micro``: one producer (tokenizer-worker role) and N scheduler ranks
joined with torch.distributed over gloo. Process plumbing only: the pipeline's sequence is
``pipeline.recipe``'s (producer step, send, receive, broadcast, scheduler step), which
times each stage (``ClockHook``: ``time.perf_counter`` after a CUDA synchronize,
comparable across processes on one host) and writes the copy ledger."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import torch

from kimi_bench.domain.decoders import DecoderChoice, choose
from kimi_bench.domain.materialize import materialize, to_tower_buffer
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.pixels import stage_input
from kimi_bench.domain.runtime import get_profile
from kimi_bench.domain.scheduler import assign_owners, images_of_rank
from kimi_bench.engine.launch import clock_offset, gloo_rank, rank_device
from kimi_bench.engine.micro_job import (
    MicroJob,
    arena_spec,
    control_inputs,
    job_images,
    job_inputs,
    rounds,
)
from kimi_bench.engine.micro_messages import Floor, ProducerMarks, RankMarks, RepeatMessage
from kimi_bench.engine.procs import worker_threads
from kimi_bench.engine.profiling import StageProfiler, maybe_profiler
from kimi_bench.infra.stats import median
from kimi_bench.pipeline import ClockHook, Gloo, Step, arm, carrier, make_step, recipe
from kimi_bench.pipeline.arena import Arena, attach_run_arena


def _step(
    job: MicroJob,
    name: str,
    dev: torch.device,
    arena: Arena | None,
    decoder: DecoderChoice,
    prof: StageProfiler | None = None,
) -> Step:
    """One arm's step; under ``prof`` (a profiled round) its stages are profiler ranges."""
    hook: Any = ClockHook(dev)
    if prof is not None:
        hook = prof.hook(hook)
    return make_step(
        name, job.cfg, dev, carrier_=job.transport, runtime=job.runtime, hook=hook,
        arena=arena, decoder=decoder, baseline_whitelisted=job.baseline_whitelisted,
    )  # fmt: skip


def _profiler(job: MicroJob, name: str) -> StageProfiler | None:
    """``--profile``: this process's profiler, for every arm of each profiled round."""
    return maybe_profiler(job.profile_dir, name, job.profile_repeats * len(job.arms))


def producer_main(job: MicroJob, conn: Any, q: Any) -> None:
    torch.set_num_threads(worker_threads(job.ranks + 1))
    carrier(job.transport).prepare()  # loads a runtime carrier before any timing
    dev = rank_device(job.device, 0)
    runtime = get_profile(job.runtime)
    decoder = choose(job.decoder, runtime, dev)  # the runtime's, per device
    if not all(arm(a).encoded_inputs for a in job.arms):  # an arm decodes here
        decoder.warm(dev)
    payloads = {
        False: job_inputs(job, decoder),
        True: control_inputs(job, decoder) if job.control_repeats else [],
    }
    # on a crash the harness unlinks the arena by the run's prefix
    spec = arena_spec(job)  # the run's arena, if an arm maps one
    arena = attach_run_arena(job.prefix, spec, writer=0)
    prof = _profiler(job, "producer")
    for it, control in rounds(job):
        images = payloads[control]
        under = prof if job.profiled(it, control) else None  # every arm of a profiled round
        for name in job.arms:
            conn.recv()  # "go" from rank 0
            step = _step(job, name, dev, arena, decoder, under)
            step.hook.mark("start")
            produced = recipe.producer_step(step, images, job.prefix)
            conn.send_bytes(recipe.send(step, produced.packed))
            conn.send(
                ProducerMarks(
                    marks=step.hook.marks,  # type: ignore[attr-defined]
                    ledger=step.ledger.rows(),
                    decisions=[asdict(d) for d in produced.decisions],
                    recipe=step.trail,
                    decodes=step.decodes,
                )
            )
            if prof is not None:
                prof.finish(step.hook)
            if not control:
                job.hooks.on_repeat(None, it)
    if prof is not None:
        prof.close()
    if arena is not None:
        arena.close()


def rank_main(job: MicroJob, rank: int, conn: Any, q: Any) -> None:
    torch.set_num_threads(worker_threads((job.ranks_per_node or job.ranks) + 1))
    carrier(job.transport).prepare()  # loads a runtime carrier before any timing
    dev = rank_device(job.device, rank, job.ranks_per_node)
    with gloo_rank(job.init_file, rank, job.ranks, dev) as device_group:
        job.hooks.before_attach(rank)
        spec = arena_spec(job)  # the run's arena, if an arm maps one
        arena = attach_run_arena(job.prefix, spec, rank=rank)
        try:
            if arena is not None and dev.type == "cuda":
                arena.register_cuda()  # once per rank, timed; reported with the floor
            _rank_loop(job, rank, dev, conn, q, arena, device_group)
        finally:
            if arena is not None:
                arena.close()


def _receive(job: MicroJob, step: Step, ranks: Gloo, rank: int, conn: Any) -> tuple[Any, Any]:
    """Rank 0 takes the producer's request (pickled, as over ZMQ); then the broadcast."""
    packed, producer = None, None
    if rank == 0:
        conn.send("go")
        packed = recipe.receive(step, conn.recv_bytes())
        producer = conn.recv()
    return recipe.broadcast(step, ranks, packed, rank), producer


def _rank_loop(
    job: MicroJob,
    rank: int,
    dev: torch.device,
    conn: Any,
    q: Any,
    arena: Arena | None = None,
    group: Any = None,
) -> None:
    import torch.distributed as dist

    # ranks on other nodes move their marks onto rank 0's clock (one host: one clock)
    offset = clock_offset(rank, job.ranks) if 0 < job.ranks_per_node < job.ranks else 0.0
    setup: list[Any] = [None] * job.ranks if rank == 0 else []
    if arena is not None:  # every rank's arena start-up cost, reported beside the floor
        dist.gather_object(arena.setup(), setup if rank == 0 else None, dst=0)
    floor = measure_floor(job, dev, rank)  # every rank at once, as the stages run
    if floor is not None:
        if arena is not None:
            floor["zero_copy_setup"] = setup
        q.send("floor", floor)
    references: dict[bool, dict[str, torch.Tensor | None]] = {False: {}, True: {}}
    ranks = Gloo(job.ranks, group)
    runtime = get_profile(job.runtime)
    decoder = choose(job.decoder, runtime, dev)  # deferred-decode's owners
    if any(arm(a).encoded_inputs for a in job.arms):  # an arm decodes at its owners
        decoder.warm(dev)
    prof = _profiler(job, f"rank{rank}")
    for it, control in rounds(job):
        reference = references[control]  # control arms are checked against control eager
        under = prof if job.profiled(it, control) else None  # every arm of a profiled round
        for name in job.arms:
            dist.barrier()
            step = _step(job, name, dev, arena, decoder, under)
            packed, producer = _receive(job, step, ranks, rank, conn)
            res = recipe.scheduler_step(step, ranks, [packed], rank)
            out, encoded = res.out, res.gathered  # encoded None: a metadata-only gather
            fp32 = out.batch.pixel_values if out.batch is not None else None
            baseline = step.arm.role == "baseline"
            if baseline:  # every other arm's owner output is held against this one's
                reference.update(bf16=out.tower, fp32=fp32, encoded=encoded)
            marks = RankMarks(
                marks={k: t + offset for k, t in step.hook.marks.items()},  # type: ignore[attr-defined]
                ledger=step.ledger.rows(),
                producer=producer,
                recipe=step.trail,
                decodes=step.decodes,
                owner_decode_ms=out.decode_ms,  # deferred-decode: inside owner_h2d
                # the owner's BF16 output and, with a device group, the gathered one
                bit_exact=None
                if baseline
                else _same(out.tower, reference.get("bf16"))
                and _same(encoded, reference.get("encoded")),
                bit_exact_fp32=None if baseline else _same(fp32, reference.get("fp32")),
            )
            if prof is not None:
                prof.finish(step.hook)
            if not control:
                job.hooks.on_repeat(rank, it)
            gathered: list[Any] = [None] * job.ranks if rank == 0 else []
            dist.gather_object(marks, gathered if rank == 0 else None, dst=0)
            if rank == 0:
                q.send("repeat", RepeatMessage(iteration=it, arm=name, ranks=gathered,
                                               control=control))  # fmt: skip
    if prof is not None:
        prof.close()


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """``torch.equal`` on the owner's output (both absent on a rank that owns nothing)."""
    if a is None or b is None:
        return a is None and b is None
    return bool(torch.equal(a, b))


FLOOR_MADE_OF = (
    "the floor is the work no arm can avoid, measured like the stages it bounds: every "
    "rank, in its own process and threads, right after a barrier, moves the raw uint8 "
    "bytes of the images it owns to its device (a pinned H2D on CUDA; on CPU the host "
    "copy that stands in for it in every arm) and materializes them into its BF16 tower "
    "buffer; a repeat takes as long as its slowest rank, and the floor is the fastest of "
    "{reps} repeats (after 2 unmeasured)."
)


def _floor_once(
    chw: list[torch.Tensor], plans: list[Any], job: MicroJob, dev: torch.device
) -> tuple[float, float]:
    """One owner's unavoidable work: (H2D or its host stand-in, materialize + cast) ms."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda *_: None)
    sync(dev)
    t0 = time.perf_counter()
    if dev.type == "cuda":
        resident = [c.to(dev, non_blocking=True) for c in chw]  # chw are pinned
    else:
        resident = [c.clone() for c in chw]  # the host copy standing in for the H2D
    sync(dev)
    t1 = time.perf_counter()
    if resident:
        to_tower_buffer(materialize(resident, plans, job.cfg, dev).split(), torch.bfloat16)
    sync(dev)
    return (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3


def measure_floor(job: MicroJob, dev: torch.device, rank: int = 0, reps: int = 10) -> Floor | None:
    """The floor, on every rank at once (call it on all ranks; rank 0 gets the result):
    each rank's owned images, owners as the pipeline assigns them (``FLOOR_MADE_OF``).
    On CUDA rank 0 also measures the pinned link rate over all raw bytes (CUDA events),
    which ``project`` calibrates on."""
    import torch.distributed as dist

    images = job_images(job)
    plans = [plan_resize(im.width, im.height, job.cfg) for im in images]
    chw = [stage_input(im, job.cfg) for im in images]
    mine = images_of_rank(assign_owners([p.num_patches for p in plans], job.ranks), rank)
    own = [chw[i].pin_memory() if dev.type == "cuda" else chw[i] for i in mine]
    times = []
    for _ in range(reps + 2):
        dist.barrier()
        times.append(_floor_once(own, [plans[i] for i in mine], job, dev))
    every: list[Any] = [None] * job.ranks if rank == 0 else []
    dist.gather_object(times[2:], every if rank == 0 else None, dst=0)
    if rank != 0:
        return None
    raw = sum(int(c.numel()) for c in chw)
    # per repeat the slowest rank; the floor is the fastest repeat
    per_rep = [max((r[k] for r in every), key=sum) for k in range(reps)]
    h2d_ms, mat_ms = min(per_rep, key=sum)
    out: Floor = {
        "raw_bytes": raw,
        "pinned_h2d_ms": None,
        "pinned_h2d_gbps": None,
        "h2d_ms": h2d_ms,
        "materialize_ms": mat_ms,
        "floor_ms": h2d_ms + mat_ms,
        "made_of": FLOOR_MADE_OF.format(reps=reps),
    }
    if dev.type == "cuda":
        link_ms = _pinned_link_ms(chw, dev, reps)
        out["pinned_h2d_ms"] = link_ms
        out["pinned_h2d_gbps"] = raw / (link_ms * 1e-3) / 1e9
    return out


def _pinned_link_ms(chw: list[torch.Tensor], dev: torch.device, reps: int) -> float:
    """Median of one pinned H2D of all raw bytes (CUDA events): the link rate."""
    pinned = torch.cat([c.flatten() for c in chw]).pin_memory()
    times = []
    for _ in range(reps + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        pinned.to(dev, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return median(times[2:])
