"""The processes of ``serve-ab``: a load generator, ``--processor-workers`` producers
(tokenizer workers) and ``--ranks`` scheduler ranks over gloo, one pipeline per arm.

Flow per request: loadgen -> shared request queue -> a producer decodes the encoded
image with PIL and does its arm's producer work -> pipe to rank 0 -> rank 0 takes what is
queued each step (continuous batching) and broadcasts the batch -> every rank: take its
copy, pre-embed move (eager), owner assignment, owner materialization, encoder stand-in,
gather, prefill stand-in -> rank 0 records the first token. Clocks: time.perf_counter
(CLOCK_MONOTONIC), comparable across the processes of one host.
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

import torch
from PIL import Image

from kimi_bench.arms import deferred_item, eager_item
from kimi_bench.bench.images import make_images
from kimi_bench.bench.procs import gloo_rank, rank_device, worker_threads
from kimi_bench.bench.standins import MatmulChain, StandinCost
from kimi_bench.config import PreprocessConfig
from kimi_bench.contract import MMItem
from kimi_bench.materialize import materialize_items, to_tower_buffer
from kimi_bench.navit import plan_resize
from kimi_bench.scheduler import assign_owners, images_of_rank
from kimi_bench.transport import broadcast_bytes, dumps, loads, pack, unlink, unpack


@dataclass(frozen=True)
class ServeJob:
    cfg: PreprocessConfig
    arm: str
    ranks: int
    workers: int
    transport: str
    device: str
    resolution: tuple[int, int]
    images_per_request: int
    image_format: str
    image_content: str
    unique_images: int
    seed: int
    arrivals: tuple[float, ...]
    warmup_requests: int
    cost: StandinCost
    prefix: str
    init_file: str
    request_timeout_s: float = 60.0
    fault: str | None = None  # "producer:RID" dies / "hang:RID" wedges on that request

    @property
    def total(self) -> int:
        return self.warmup_requests + len(self.arrivals)


def make_payloads(job: ServeJob) -> list[bytes]:
    """Encoded request images, identical for both arms at a given seed."""
    w, h = job.resolution
    out = []
    for img in make_images(((job.unique_images, w, h),), job.image_content, job.seed):
        buf = io.BytesIO()
        if job.image_format == "png":
            img.save(buf, format="PNG")
        else:
            img.save(buf, format="JPEG", quality=85)
        out.append(buf.getvalue())
    return out


def loadgen_main(job: ServeJob, req_q: Any, warm_evt: Any, outbox: Any) -> None:
    for rid in range(job.warmup_requests):
        req_q.put((rid, True, time.perf_counter()))
    if job.warmup_requests and not warm_evt.wait(job.request_timeout_s * 2):
        raise TimeoutError("warm-up requests did not finish in time")
    t0 = time.perf_counter()
    outbox.send("trace_start", t0)
    for j, offset in enumerate(job.arrivals):
        delay = t0 + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        req_q.put((job.warmup_requests + j, False, time.perf_counter()))


def producer_main(job: ServeJob, wid: int, req_q: Any, conn: Any, outbox: Any) -> None:
    torch.set_num_threads(worker_threads(job.ranks + job.workers + 1))
    dev = rank_device(job.device, 0)
    payloads = make_payloads(job)
    while True:
        msg = req_q.get()
        if msg is None:
            return
        rid, warm, t_sent = msg
        if job.fault == f"producer:{rid}":
            os._exit(3)  # a hard crash, as a segfaulting worker would
        if job.fault == f"hang:{rid}":
            time.sleep(3600)  # a wedged worker: the request must time out, not hang the run
        rec: dict[str, Any] = {
            "rid": rid,
            "warm": warm,
            "t_sent": t_sent,
            "t_start": time.perf_counter(),
            "worker": wid,
        }
        try:
            keys = [
                (rid * job.images_per_request + k) % len(payloads)
                for k in range(job.images_per_request)
            ]
            images = []
            for k in keys:
                im = Image.open(io.BytesIO(payloads[k]))
                im.load()
                images.append(im)
            rec["t_decoded"] = time.perf_counter()
            plans = [plan_resize(*im.size, job.cfg) for im in images]
            if job.arm == "eager":
                items = [
                    eager_item(im, p, job.cfg, dev) for im, p in zip(images, plans, strict=True)
                ]
            else:
                items = [deferred_item(im, p, job.cfg) for im, p in zip(images, plans, strict=True)]
            rec["feature_bytes"] = sum(i.feature.numel() * i.feature.element_size() for i in items)
            rec["image_tokens"] = sum(p.num_tokens for p in plans)
            rec["patches"] = sum(p.num_patches for p in plans)
            rec["items"], rec["shm_bytes"] = pack(items, job.transport, job.prefix)  # type: ignore[arg-type]
        except Exception as exc:  # a bad request fails alone
            rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["t_produced"] = time.perf_counter()
        conn.send_bytes(dumps(rec))


def rank_main(
    job: ServeJob, rank: int, conns: list[Any], req_q: Any, warm_evt: Any, outbox: Any
) -> None:
    torch.set_num_threads(worker_threads(job.ranks + job.workers + 1))
    dev = rank_device(job.device, rank)
    with gloo_rank(job.init_file, rank, job.ranks, dev):
        _Rank(job, rank, dev, conns, req_q, warm_evt, outbox).loop()


class _Rank:
    def __init__(
        self,
        job: ServeJob,
        rank: int,
        dev: torch.device,
        conns: list[Any],
        req_q: Any,
        warm_evt: Any,
        outbox: Any,
    ) -> None:
        self.job, self.rank, self.dev = job, rank, dev
        self.conns, self.req_q, self.warm_evt, self.outbox = conns, req_q, warm_evt, outbox
        self.chain = MatmulChain(dev, seed=rank)
        self.scale = job.cost.scaled(dev, job.ranks)
        self.done = 0
        self.warm_done = 0
        self.last_progress = time.perf_counter()

    def _collect(self) -> dict[str, Any]:
        """Rank 0: everything queued now (waits briefly when nothing is)."""
        reqs = []
        ready = wait(self.conns, timeout=0.02)
        while ready:
            for c in ready:
                rec = loads(c.recv_bytes())  # type: ignore[union-attr]
                rec["t_recv"] = time.perf_counter()
                reqs.append(rec)
            ready = wait(self.conns, timeout=0)
        if reqs:
            self.last_progress = time.perf_counter()
        stalled = time.perf_counter() - self.last_progress > self.job.request_timeout_s
        stop = self.done + len(reqs) >= self.job.total or stalled
        return {"reqs": reqs, "stop": stop, "stalled": stalled, "t_step": time.perf_counter()}

    def loop(self) -> None:
        while True:
            batch = self._collect() if self.rank == 0 else None
            blob = broadcast_bytes(dumps(batch) if self.rank == 0 else None, src=0)
            if self.rank != 0:
                batch = loads(blob)
            assert batch is not None
            if batch["reqs"]:
                self._step(batch, len(blob))
            if batch["stop"]:
                if self.rank == 0:
                    for _ in range(self.job.workers):
                        self.req_q.put(None)
                    if batch["stalled"]:
                        self.outbox.send("stalled", self.job.total - self.done)
                return

    def _step(self, batch: dict[str, Any], blob_bytes: int) -> None:
        import torch.distributed as dist

        job = self.job
        ok = [r for r in batch["reqs"] if "error" not in r]
        items: list[MMItem] = [it for r in ok for it in r["items"]]
        copied, names = 0, list[str]()
        if job.transport == "shm":
            dist.barrier()
            items, copied, names = unpack(items)
            dist.barrier()
            if self.rank == 0:
                unlink(names)
        moved = 0
        if job.arm == "eager" and self.dev.type == "cuda":
            for it in items:  # the pre-embed move: every rank, every item
                it.feature = it.feature.to(self.dev, non_blocking=True)
                moved += it.feature.numel() * it.feature.element_size()
        owners = assign_owners([it.num_patches for it in items], job.ranks)
        mine = [items[i] for i in images_of_rank(owners, self.rank)]
        patches = sum(it.num_patches for it in mine)
        if mine:
            feats = materialize_items(mine, job.cfg, self.dev)
            to_tower_buffer(feats.split(), torch.bfloat16)
            self.chain.run(patches, patches * job.cost.encoder_gflop_per_patch * self.scale)
        sizes: list[Any] = [None] * job.ranks
        dist.all_gather_object(sizes, (self.rank, patches))  # the gather (metadata stand-in)
        tokens = sum(r["image_tokens"] + job.cost.text_tokens_per_request for r in ok)
        gflop = tokens * job.cost.prefill_gflop_per_token * self.scale / job.ranks
        self.chain.run(max(1, tokens // job.ranks), gflop)
        step_bytes = {"moved": moved, "copied": copied}
        stats: list[Any] = [None] * job.ranks
        dist.all_gather_object(stats, step_bytes)  # also the TP sync before the first token
        if self.rank == 0:
            self._finish(batch, stats, blob_bytes)

    def _finish(self, batch: dict[str, Any], stats: list[Any], blob_bytes: int) -> None:
        t_first = time.perf_counter()
        n = len(batch["reqs"])
        per_req = {
            "broadcast_bytes": blob_bytes * (self.job.ranks - 1) // max(1, n),
            "copy_bytes": sum(s["copied"] for s in stats) // max(1, n),
            "pre_embed_bytes": sum(s["moved"] for s in stats) // max(1, n),
        }
        for r in batch["reqs"]:
            r.pop("items", None)
            r.update(per_req, t_step=batch["t_step"], t_first=t_first, batch_requests=n)
            self.done += 1
            if r["warm"]:
                self.warm_done += 1
                if self.warm_done == self.job.warmup_requests:
                    self.warm_evt.set()
            self.outbox.send("request", r)
