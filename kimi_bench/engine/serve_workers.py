"""The processes of ``serve-ab``: a load generator, ``--processor-workers`` producers
(tokenizer workers; both in ``serve_producer``) and ``--ranks`` scheduler ranks over gloo
(here), one pipeline per arm.

Flow per request: loadgen -> shared request queue -> a producer decodes the encoded
image with PIL and does its arm's producer work -> pipe to rank 0 -> rank 0 takes what is
queued each step (continuous batching) and broadcasts the batch -> every rank: take its
copy, pre-embed move (eager), owner assignment, owner materialization, encoder stand-in,
gather, prefill stand-in -> rank 0 records the first token. A request that asks for more
tokens (the emulator's ``max_tokens``) then takes part in every later step's decode
stand-in, one token per step (continuous batching: a step prefills the newly scheduled
requests and decodes the running ones), and rank 0 reports each decode step's tokens.
Clocks: time.perf_counter (CLOCK_MONOTONIC), comparable across the processes of one host.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import wait
from typing import Any

import torch

from kimi_bench.domain.ledger import Ledger
from kimi_bench.engine.launch import gloo_rank, rank_device
from kimi_bench.engine.procs import worker_threads
from kimi_bench.engine.profiling import maybe_profiler
from kimi_bench.engine.serve_job import LoadJob, PipelineJob, arena_spec
from kimi_bench.engine.serve_records import Batch, PipelineRequest, TokensMessage
from kimi_bench.engine.standins import MatmulChain
from kimi_bench.pipeline import (
    Gloo,
    RankOutput,
    Step,
    recipe,
    recipe_record,
)
from kimi_bench.pipeline.arena import Arena, attach_run_arena
from kimi_bench.pipeline.recipe import choose_once


def rank_main(
    job: PipelineJob,
    load: LoadJob,
    rank: int,
    conns: list[Any],
    req_q: Any,
    warm_evt: Any,
    outbox: Any,
) -> None:
    torch.set_num_threads(worker_threads((job.ranks_per_node or job.ranks) + job.workers + 1))
    dev = rank_device(job.device, rank, job.ranks_per_node)
    with gloo_rank(job.init_file, rank, job.ranks, dev) as device_group:
        spec = arena_spec(job)  # the run's arena, if an arm maps one
        arena = attach_run_arena(job.prefix, spec, rank=rank)
        if arena is not None:
            if dev.type == "cuda":
                arena.register_cuda()  # once per rank, timed, reported on its own
            outbox.send("arena", {"rank": rank, **arena.setup()})
        _Rank(job, rank, dev, conns, req_q, outbox, arena, device_group, load=load,
              warm_evt=warm_evt).loop()  # fmt: skip
        if arena is not None:
            arena.close()


class _Rank:
    """One scheduler rank: continuous batching at rank 0, then the pipeline's broadcast,
    take, rank step, the encoder stand-in, the gather and the prefill stand-in."""

    def __init__(
        self,
        job: PipelineJob,
        rank: int,
        dev: torch.device,
        conns: list[Any],
        req_q: Any,
        outbox: Any,
        arena: Arena | None = None,
        group: Any = None,
        *,
        load: LoadJob | None = None,
        warm_evt: Any = None,
        stop_evt: Any = None,
    ) -> None:
        self.job, self.rank, self.dev, self.arena = job, rank, dev, arena
        self.load = load  # serve-ab's load generator (None: fed by a serving backend)
        self.group = group  # the NCCL device group (one GPU per rank), else None
        self.ranks = Gloo(job.ranks, group)
        # the arm, carrier, profile and the owners' decoder, chosen once
        self.chosen = choose_once((job.arm,), job.transport, job.runtime, job.decoder, dev)
        self.decoder = self.chosen.decoder
        the_arm = self.chosen.arms[job.arm]
        if the_arm.encoded_inputs:  # the owners decode: warm before traffic (a first GPU
            self.decoder.warm(dev)  # decode loads the library: seconds, in one step)
        self.recipe: list[str] = []  # the last step's recipe trail (rank side)
        self.producer_trails: dict[int, list[str]] = {}  # rank 0: by request id
        self.conns, self.req_q, self.outbox = conns, req_q, outbox
        # loadgen source: set once the warm-up requests are done; queue source: stops the loop
        self.warm_evt, self.stop_evt, self.parent = warm_evt, stop_evt, os.getppid()
        self.chain = MatmulChain(dev, seed=rank)
        self.scale = job.cost.scaled(dev, job.ranks)
        self.ledger = Ledger()  # measured (not warm-up) steps of this rank
        self.done = 0
        self.steps = 0  # forward batches served (rank 0): the independent unit of TTFT
        self.warm_done = 0
        self.last_progress = time.perf_counter()
        self.decoding: dict[int, int] = {}  # rank 0: request id -> tokens still to decode
        self.prof = maybe_profiler(job.profile_dir, f"rank{rank}", job.profile_requests)

    def _new_step(self) -> Step:
        return self.chosen.step(
            self.job.arm, self.job.cfg, self.dev, arena=self.arena,
            baseline_whitelisted=self.job.baseline_whitelisted,
            hook=self.prof.hook(None) if self.prof is not None else None,
        )  # fmt: skip

    idle_wait_s = 0.02  # rank 0 waits up to this for a request when none is queued

    def _should_stop(self, new: int) -> tuple[bool, bool]:
        """(stop, stalled) after a collect that took ``new`` requests."""
        assert self.load is not None
        stalled = time.perf_counter() - self.last_progress > self.load.request_timeout_s
        return self.done + new >= self.load.total or stalled, stalled

    def _collect(self, step: Step) -> Batch:
        """Rank 0: everything queued now (waits briefly when nothing is)."""
        reqs: list[PipelineRequest] = []
        ready = wait(self.conns, timeout=0 if self.decoding else self.idle_wait_s)
        while ready:
            for c in ready:
                conn: Any = c  # a producer's pipe end
                rec: PipelineRequest = recipe.receive(step, conn.recv_bytes)
                rec["t_recv"] = time.perf_counter()
                rows, self.producer_trails[rec["rid"]] = conn.recv()
                own = Ledger().merge(rows)
                rec["producer_copied_bytes"] = own.copied_bytes()
                step.ledger.merge(own)
                reqs.append(rec)
            ready = wait(self.conns, timeout=0)
        if reqs:
            self.last_progress = time.perf_counter()
        stop, stalled = self._should_stop(len(reqs))
        return {"reqs": reqs, "stop": stop, "stalled": stalled, "t_step": time.perf_counter(),
                "decode": list(self.decoding)}  # fmt: skip

    def loop(self) -> None:
        while True:
            step = self._new_step()
            mine = self._collect(step) if self.rank == 0 else None
            batch: Batch = recipe.broadcast(step, self.ranks, mine, self.rank)
            if batch["reqs"]:
                self._step(step, batch)
            if batch.get("decode"):
                self._decode(batch["decode"])
            if self.prof is not None:  # a step that served a profiled request counts
                counted = any(r["rid"] >= self.job.profile_skip for r in batch["reqs"])
                self.prof.finish(step.hook) if counted else self.prof.drop(step.hook)
            if batch["stop"]:
                if self.prof is not None:
                    self.prof.close()
                self._stop(batch)
                return

    def _stop(self, batch: Batch) -> None:
        import torch.distributed as dist

        ledgers: list[Any] = [None] * self.job.ranks
        dist.all_gather_object(ledgers, self.ledger.rows())
        if self.rank != 0:
            return
        total = Ledger()
        for rows in ledgers:
            total.merge(rows)
        self.outbox.send("ledger", total.rows())
        for _ in range(self.job.workers):
            self.req_q.put(None)
        if batch["stalled"] and self.load is not None:
            self.outbox.send("stalled", self.load.total - self.done)

    def _step(self, step: Step, batch: Batch) -> None:
        import torch.distributed as dist

        job = self.job
        ok = [r for r in batch["reqs"] if "error" not in r]
        failed: list[tuple[int, str]] = []  # deferred-decode: images their owner could not decode
        done = recipe.scheduler_step(
            step, self.ranks, [r["items"] for r in ok], self.rank, encoder=self._encoder,
            decode_errors=failed,
        )  # fmt: skip
        self.recipe = step.trail
        tokens = sum(r["image_tokens"] + job.cost.text_tokens_per_request for r in ok)
        gflop = tokens * job.cost.prefill_gflop_per_token * self.scale / job.ranks
        self.chain.run(max(1, tokens // job.ranks), gflop)
        # rank 0's step ledger also holds the producers' entries (merged when collected)
        producers = sum(r["producer_copied_bytes"] for r in ok) if self.rank == 0 else 0
        rank_copied = step.ledger.copied_bytes() - producers
        stats: list[Any] = [None] * job.ranks
        mine = (rank_copied, failed, done.out.decoded)  # also the TP sync before prefill
        dist.all_gather_object(stats, mine)
        if not any(r["warm"] for r in batch["reqs"]):
            self.ledger.merge(step.ledger)
        if self.rank == 0:
            _fail_undecoded(ok, [f for _, fs, _ in stats for f in fs])
            _owner_decodes(ok, [d for *_, ds in stats for d in ds])
            self._finish(batch, sum(c for c, *_ in stats))

    def _decode(self, rids: list[int]) -> None:
        """The decode stand-in: one token for each running request (split over the ranks,
        sized per token like the prefill's); rank 0 reports the step's tokens."""
        cost = self.job.cost
        gflop = len(rids) * cost.decode_gflop_per_token * self.scale / self.job.ranks
        self.chain.run(max(1, len(rids)), gflop)
        if self.rank != 0:
            return
        done = []
        for rid in rids:
            self.decoding[rid] -= 1
            if self.decoding[rid] <= 0:
                done.append(rid)
                del self.decoding[rid]
        self.outbox.send("tokens", TokensMessage(rids=rids, t=time.perf_counter(), done=done))

    def _encoder(self, out: RankOutput) -> None:
        """The encoder stand-in on this rank's own images (between materialize and gather)."""
        if out.patches:
            gflop = out.patches * self.job.cost.encoder_gflop_per_patch * self.scale
            self.chain.run(out.patches, gflop)

    def _finish(self, batch: Batch, step_copied: int) -> None:
        t_first = time.perf_counter()
        n = len(batch["reqs"])
        self.steps += 1
        for r in batch["reqs"]:
            r.pop("items", None)
            trail = recipe_record(self.producer_trails.pop(r["rid"], []), self.recipe)
            r.update({"scheduler_copied_bytes": step_copied // max(1, n), "batch_id": self.steps,
                      "t_step": batch["t_step"], "t_first": t_first, "batch_requests": n,
                      "recipe": trail})  # fmt: skip
            self.done += 1
            if int(r.get("max_tokens") or 1) > 1 and "error" not in r:
                self.decoding[r["rid"]] = int(r["max_tokens"]) - 1
            if r["warm"]:
                self.warm_done += 1
                if self.load is not None and self.warm_done == self.load.warmup_requests:
                    self.warm_evt.set()
            self.outbox.send("request", r)


# ------------------------------------------- source "queue": fed by a serving backend


def _fail_undecoded(ok: list[PipelineRequest], failed: list[tuple[int, str]]) -> None:
    """Mark the requests whose image an owner could not decode (deferred-decode: the
    decode error surfaces after scheduling, in the forward batch, not at the producer)."""
    if not failed:
        return
    owner_of_item = [r for r in ok for _ in r["items"]]  # the batch's items, request by request
    for i, why in failed:
        req = owner_of_item[i] if i < len(owner_of_item) else None
        if req is not None:  # "OSError: ..." first, as a producer's decode error reads
            kind, _, detail = why.partition(": ")
            req["error"] = f"{kind}: the owner could not decode image {i} of the batch: {detail}"


def _owner_decodes(ok: list[PipelineRequest], decoded: list[tuple[int, Any]]) -> None:
    """deferred-decode: which decoder each owner used for a request's images, and why,
    added to the request's decodes (its producer only read the headers)."""
    owner_of_item = [r for r in ok for _ in r["items"]]
    for i, (name, why) in decoded:
        if i < len(owner_of_item):
            owner_of_item[i].setdefault("decodes", []).append((name, why))


def serve_rank_main(
    job: PipelineJob, rank: int, conns: list[Any], req_q: Any, stop_evt: Any, outbox: Any
) -> None:
    """A rank of a pipeline fed by a serving backend (no load job): it runs
    until ``stop_evt`` is set or its parent process is gone. Rank 0 sends each request
    (``"request"``) as today; after each step every rank also sends the copy ledger of
    that step (``"copies"``), so the backend can count bytes moved while it serves."""
    torch.set_num_threads(worker_threads(job.ranks + job.workers + 1))
    dev = rank_device(job.device, rank, job.ranks_per_node)
    with gloo_rank(job.init_file, rank, job.ranks, dev) as device_group:
        spec = arena_spec(job)  # the run's arena, if an arm maps one
        arena = attach_run_arena(job.prefix, spec, rank=rank)
        if arena is not None and dev.type == "cuda":
            arena.register_cuda()  # once per rank, at start-up
        _QueueRank(
            job, rank, dev, conns, req_q, outbox, arena, device_group, stop_evt=stop_evt
        ).loop()
        if arena is not None:
            arena.close()


class _QueueRank(_Rank):
    idle_wait_s = 0.25  # adds no latency: the wait returns as soon as a request arrives

    def _should_stop(self, new: int) -> tuple[bool, bool]:
        return self.stop_evt.is_set() or os.getppid() != self.parent, False

    def _step(self, step: Step, batch: Batch) -> None:
        super()._step(step, batch)
        self.outbox.send("copies", step.ledger.rows())
