"""The processes of ``micro``: one producer (tokenizer-worker role) and N scheduler ranks
joined with torch.distributed over gloo. Process plumbing only: the pipeline's sequence is
``pipeline.recipe``'s (producer step, send, receive, broadcast, scheduler step), which
times each stage (``ClockHook``: ``time.perf_counter`` after a CUDA synchronize,
comparable across processes on one host) and writes the copy ledger."""

from __future__ import annotations

from typing import Any

import torch

from kimi_bench.engine.floor import measure_floor
from kimi_bench.engine.launch import clock_offset, gloo_rank, rank_device
from kimi_bench.engine.micro_job import (
    MicroJob,
    arena_spec,
    control_inputs,
    job_inputs,
    rounds,
)
from kimi_bench.engine.micro_messages import (
    ProducerMarks,
    RepeatMessage,
    decision_doc,
    rank_marks,
)
from kimi_bench.engine.procs import worker_threads
from kimi_bench.engine.profiling import StageProfiler, maybe_profiler
from kimi_bench.pipeline import ClockHook, Gloo, Step, carrier, recipe
from kimi_bench.pipeline.arena import Arena, attach_run_arena
from kimi_bench.pipeline.recipe import Chosen, choose_once


def _step(
    job: MicroJob,
    chosen: Chosen,
    name: str,
    dev: torch.device,
    arena: Arena | None,
    prof: StageProfiler | None = None,
    rank: int | None = None,
) -> Step:
    """One arm's step in the producer (``rank`` None) or a rank; under ``prof`` (a
    profiled round) its stages are profiler ranges. The fault hooks may wrap its clock.
    Every round is the same request seen afresh: the arm's preprocess cache starts empty
    (only the request's own repeats hit it)."""
    clock = job.hooks.clock(name, rank, ClockHook(dev))
    hook = clock if prof is None else prof.hook(clock)
    if (cache := chosen.caches.get(name)) is not None:
        cache.clear()
    return chosen.step(
        name, job.cfg, dev, hook=hook, arena=arena, baseline_whitelisted=job.baseline_whitelisted
    )


def _profiler(job: MicroJob, name: str) -> StageProfiler | None:
    """``--profile``: this process's profiler, for every arm of each profiled round."""
    return maybe_profiler(job.profile_dir, name, job.profile_repeats * len(job.arms))


def producer_main(job: MicroJob, conn: Any, q: Any) -> None:
    torch.set_num_threads(worker_threads(job.ranks + 1))
    carrier(job.transport).prepare()  # loads a runtime carrier before any timing
    dev = rank_device(job.device, 0)
    chosen = choose_once(job.arms, job.transport, job.runtime, job.decoder, dev)
    decoder = chosen.decoder  # the runtime's, per device
    if not all(a.encoded_inputs for a in chosen.arms.values()):  # an arm decodes here
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
            step = _step(job, chosen, name, dev, arena, under)
            step.hook.mark("start")
            produced = recipe.producer_step(step, images, job.prefix)
            recipe.send(step, produced.packed, conn.send_bytes)
            conn.send(
                ProducerMarks(
                    marks=step.hook.marks,  # type: ignore[attr-defined]
                    ledger=step.ledger.rows(),
                    decisions=[decision_doc(d) for d in produced.decisions],
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
        chosen = choose_once(job.arms, job.transport, job.runtime, job.decoder, dev)
        job.hooks.before_attach(rank)
        spec = arena_spec(job)  # the run's arena, if an arm maps one
        arena = attach_run_arena(job.prefix, spec, rank=rank)
        try:
            if arena is not None and dev.type == "cuda":
                arena.register_cuda()  # once per rank, timed; reported with the floor
            _rank_loop(job, chosen, rank, dev, conn, q, arena, device_group)
        finally:
            if arena is not None:
                arena.close()


def _receive(job: MicroJob, step: Step, ranks: Gloo, rank: int, conn: Any) -> tuple[Any, Any]:
    """Rank 0 takes the producer's request (pickled, as over ZMQ); then the broadcast."""
    packed, producer = None, None
    if rank == 0:
        conn.send("go")
        packed = recipe.receive(step, conn.recv_bytes)
        producer = conn.recv()
    return recipe.broadcast(step, ranks, packed, rank), producer


def _rank_loop(
    job: MicroJob,
    chosen: Chosen,
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
    if any(a.encoded_inputs for a in chosen.arms.values()):  # an arm decodes at its owners
        chosen.decoder.warm(dev)
    prof = _profiler(job, f"rank{rank}")
    for it, control in rounds(job):
        reference = references[control]  # control arms are checked against control eager
        under = prof if job.profiled(it, control) else None  # every arm of a profiled round
        for name in job.arms:
            dist.barrier()
            step = _step(job, chosen, name, dev, arena, under, rank)
            packed, producer = _receive(job, step, ranks, rank, conn)
            res = recipe.scheduler_step(step, ranks, [packed], rank)
            # every arm's owner output is held against the baseline's (``reference``)
            marks = rank_marks(step, res, producer, offset, reference)
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
