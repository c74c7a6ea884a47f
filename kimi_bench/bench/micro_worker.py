"""The processes of ``micro``: one producer (tokenizer-worker role) and N scheduler
ranks joined with torch.distributed over gloo. Every stage is timed with
``time.perf_counter`` (CLOCK_MONOTONIC, comparable across processes on one host) after
a CUDA synchronize where GPU work precedes the clock read."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from kimi_bench.arms import deferred_item
from kimi_bench.bench.procs import gloo_rank, rank_device, worker_threads
from kimi_bench.config import PreprocessConfig
from kimi_bench.contract import GRID_KEY, MMItem, grid_tensor
from kimi_bench.materialize import materialize, materialize_items, to_tower_buffer
from kimi_bench.navit import plan_resize
from kimi_bench.pixels import stage_input
from kimi_bench.scheduler import assign_owners, images_of_rank
from kimi_bench.transport import broadcast_bytes, dumps, loads, pack, unlink, unpack

ARMS = ("eager", "deferred")
# Boundaries of the critical path; stage k lasts from boundary k-1 to boundary k.
STAGES = (
    "producer",
    "d2h",
    "serialize",
    "to_rank0",
    "broadcast",
    "take_copy",
    "pre_embed_move",
    "owner_h2d",
    "owner_materialize",
)


@dataclass(frozen=True)
class MicroJob:
    cfg: PreprocessConfig
    groups: tuple[tuple[int, int, int], ...]  # (count, width, height)
    content: str
    seed: int
    ranks: int
    transport: str
    device: str  # "cuda" or "cpu"
    repeats: int
    warmup: int
    prefix: str
    init_file: str
    fault: str | None = None  # "rank:R:repeat:K" raises there (tests)

    @property
    def iterations(self) -> int:
        return self.warmup + self.repeats


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _now(dev: torch.device | None = None) -> float:
    if dev is not None:
        _sync(dev)
    return time.perf_counter()


def _maybe_fault(job: MicroJob, who: str, it: int) -> None:
    if job.fault and job.fault == f"{who}:repeat:{it}":
        raise RuntimeError(f"injected fault at {who}, iteration {it}")


def producer_main(job: MicroJob, conn: Any, q: Any) -> None:
    from kimi_bench.bench.images import make_images

    torch.set_num_threads(worker_threads(job.ranks + 1))
    dev = rank_device(job.device, 0)
    images = make_images(job.groups, job.content, job.seed)
    plans = [plan_resize(*im.size, job.cfg) for im in images]
    for it in range(job.iterations):
        for arm in ARMS:
            conn.recv()  # "go" from rank 0
            t0 = _now()
            if arm == "eager":
                chw = [stage_input(im, job.cfg) for im in images]
                batch = materialize(chw, plans, job.cfg, dev)
                t1 = _now(dev)
                host = batch.pixel_values.cpu()  # D2H, pageable, as the runtime does
                t2 = _now()
                counts = batch.patch_counts()
                feats = torch.split(host, counts)
                items = [
                    MMItem(f.clone(), {GRID_KEY: grid_tensor(p)})
                    for f, p in zip(feats, plans, strict=True)
                ]
            else:
                items = [deferred_item(im, p, job.cfg) for im, p in zip(images, plans, strict=True)]
                t1 = t2 = _now()
            feature_bytes = sum(i.feature.numel() * i.feature.element_size() for i in items)
            packed, shm_bytes = pack(items, job.transport, job.prefix)  # type: ignore[arg-type]
            blob = dumps(packed)
            t3 = _now()
            conn.send_bytes(blob)
            conn.send(
                {
                    "t0": t0,
                    "t1": t1,
                    "t2": t2,
                    "t3": t3,
                    "feature_bytes": feature_bytes,
                    "shm_bytes": shm_bytes,
                    "blob_bytes": len(blob),
                    "producer_h2d_bytes": sum(int(c.numel()) for c in chw)
                    if arm == "eager" and dev.type == "cuda"
                    else 0,
                }
            )
            _maybe_fault(job, "producer", it)


def rank_main(job: MicroJob, rank: int, conn: Any, q: Any) -> None:
    torch.set_num_threads(worker_threads(job.ranks + 1))
    dev = rank_device(job.device, rank)
    with gloo_rank(job.init_file, rank, job.ranks, dev):
        _rank_loop(job, rank, dev, conn, q)


def _rank_loop(job: MicroJob, rank: int, dev: torch.device, conn: Any, q: Any) -> None:
    import torch.distributed as dist

    if rank == 0:
        q.send("floor", measure_floor(job, dev))
    eager_out: torch.Tensor | None = None
    for it in range(job.iterations):
        for arm in ARMS:
            dist.barrier()
            marks: dict[str, Any] = {}
            payload: bytes | None = None
            if rank == 0:
                conn.send("go")
                blob = conn.recv_bytes()
                items_in = loads(blob)
                marks["received"] = _now()
                marks["producer"] = conn.recv()
                payload = dumps(items_in)
                marks["bcast_bytes"] = len(payload)
            received = broadcast_bytes(payload, src=0)  # rank 0 sends, the others receive
            items = items_in if rank == 0 else loads(received)
            marks["broadcast"] = _now()
            names: list[str] = []
            if job.transport == "shm":
                dist.barrier()
                items, marks["copy_bytes"], names = unpack(items)
                dist.barrier()  # every rank holds its copy before the segments go
                if rank == 0:
                    unlink(names)
            marks["take_copy"] = _now()
            h2d = 0
            if arm == "eager" and dev.type == "cuda":
                for item in items:  # every rank moves every item: the pre-embed move
                    item.feature = item.feature.to(dev, non_blocking=True)
                    h2d += item.feature.numel() * item.feature.element_size()
            marks["pre_embed_move"] = _now(dev)
            marks["pre_embed_bytes"] = h2d
            owners = assign_owners([i.num_patches for i in items], job.ranks)
            mine = [items[i] for i in images_of_rank(owners, rank)]
            owner_h2d = 0
            if arm == "deferred" and dev.type == "cuda":
                for item in mine:
                    owner_h2d += item.feature.numel()
                    item.feature = item.feature.to(dev, non_blocking=True)
            marks["owner_h2d"] = _now(dev)
            marks["owner_h2d_bytes"] = owner_h2d
            out = None
            if mine:
                batch = materialize_items(mine, job.cfg, dev)
                out = to_tower_buffer(batch.split(), torch.bfloat16)
            marks["owner_materialize"] = _now(dev)
            if arm == "eager":
                eager_out = out
                marks["bit_exact"] = None
            else:
                same = (out is None and eager_out is None) or (
                    out is not None and eager_out is not None and torch.equal(out, eager_out)
                )
                marks["bit_exact"] = bool(same)
            _maybe_fault(job, f"rank:{rank}", it)
            gathered: list[Any] = [None] * job.ranks if rank == 0 else []
            dist.gather_object(marks, gathered if rank == 0 else None, dst=0)
            if rank == 0:
                q.send("repeat", {"iteration": it, "arm": arm, "ranks": gathered})


def measure_floor(job: MicroJob, dev: torch.device, reps: int = 10) -> dict[str, Any]:
    """The physical floor: one pinned H2D of the raw bytes + the materialize kernel."""
    from kimi_bench.bench.images import make_images
    from kimi_bench.bench.stats import median

    images = make_images(job.groups, job.content, job.seed)
    plans = [plan_resize(*im.size, job.cfg) for im in images]
    chw = [stage_input(im, job.cfg) for im in images]
    raw = sum(int(c.numel()) for c in chw)
    out: dict[str, Any] = {"raw_bytes": raw}
    if dev.type == "cuda":
        pinned = torch.cat([c.flatten() for c in chw]).pin_memory()
        times = []
        for _ in range(reps + 2):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            pinned.to(dev, non_blocking=True)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        h2d_ms = median(times[2:])
        out["pinned_h2d_ms"] = h2d_ms
        out["pinned_h2d_gbps"] = raw / (h2d_ms * 1e-3) / 1e9
        resident = [c.to(dev) for c in chw]
    else:
        out["pinned_h2d_ms"] = None
        out["pinned_h2d_gbps"] = None
        resident = chw
    ktimes = []
    for _ in range(reps + 2):
        t0 = _now(dev)
        materialize(resident, plans, job.cfg, dev)
        ktimes.append((_now(dev) - t0) * 1e3)
    out["materialize_ms"] = median(ktimes[2:])
    out["floor_ms"] = out["materialize_ms"] + (out["pinned_h2d_ms"] or 0.0)
    return out
