"""The floor of a ``micro`` run: the work no arm can avoid (``FLOOR_MADE_OF``), measured
in every rank's process as the stages it bounds are, and on CUDA the pinned link rate that
``project`` calibrates on. The report keeps it as ``data.floor``."""

from __future__ import annotations

import time
from typing import Any

import torch

from kimi_bench.domain.materialize import materialize, to_tower_buffer
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.pixels import stage_input
from kimi_bench.domain.scheduler import assign_owners, images_of_rank
from kimi_bench.engine.micro_job import MicroJob, job_images
from kimi_bench.engine.micro_messages import Floor
from kimi_bench.infra.stats import median

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
