"""The load generator and the producers (tokenizer workers) of ``serve-ab`` and ``kimi-bench
serve``; the scheduler ranks they feed are in ``serve_workers`` (its docstring has the flow
of a request). Clocks: time.perf_counter (CLOCK_MONOTONIC), comparable across the
processes of one host."""

from __future__ import annotations

import time
from typing import Any

import torch

from kimi_bench.engine.launch import rank_device
from kimi_bench.engine.procs import worker_threads
from kimi_bench.engine.profiling import maybe_profiler
from kimi_bench.engine.serve_job import LoadJob, PipelineJob, arena_spec, make_payloads
from kimi_bench.engine.serve_records import PipelineRequest
from kimi_bench.pipeline import feature_bytes, recipe
from kimi_bench.pipeline.arena import attach_run_arena
from kimi_bench.pipeline.cache_steps import load_inputs
from kimi_bench.pipeline.recipe import choose_once


def loadgen_main(load: LoadJob, req_q: Any, warm_evt: Any, outbox: Any) -> None:
    for rid in range(load.warmup_requests):
        req_q.put((rid, True, time.perf_counter()))
    if load.warmup_requests and not warm_evt.wait(load.request_timeout_s * 2):
        raise TimeoutError("warm-up requests did not finish in time")
    t0 = time.perf_counter()
    outbox.send("trace_start", t0)
    for j, offset in enumerate(load.arrivals):
        delay = t0 + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        req_q.put((load.warmup_requests + j, False, time.perf_counter()))


def producer_main(
    job: PipelineJob, load: LoadJob | None, wid: int, req_q: Any, conn: Any, outbox: Any
) -> None:
    """A producer (tokenizer worker). With a load job the request images are generated
    here (``make_payloads``); without one (the emulator) they come with each request."""
    torch.set_num_threads(worker_threads(job.ranks + job.workers + 1))
    dev = rank_device(job.device, 0)
    payloads = make_payloads(load) if load is not None else []
    # the arm, carrier, profile and decoder (the runtime's, per device), chosen once
    chosen = choose_once(
        (job.arm,), job.transport, job.runtime, job.decoder, dev, tokenizer_workers=job.workers
    )
    decoder = chosen.decoder
    if not chosen.arms[job.arm].encoded_inputs:  # this producer decodes: warm it before traffic
        decoder.warm(dev)
    # on a crash the harness unlinks the arena by the run's prefix
    spec = arena_spec(job)  # the run's arena, if an arm maps one
    arena = attach_run_arena(job.prefix, spec, writer=wid)
    prof = maybe_profiler(job.profile_dir, f"producer{wid}", job.profile_requests)
    flushed = 0  # the emulator's cache epoch this producer last emptied its caches at
    while True:
        msg = req_q.get()
        if msg is None:
            if arena is not None:
                arena.close()
            if prof is not None:
                prof.close()
            return
        # a "queue" source adds the request's encoded images, its max_tokens and the
        # server's cache epoch (``/flush_cache`` raises it: a newer one empties the caches)
        rid, warm, t_sent = msg[:3]
        if len(msg) > 5 and msg[5] > flushed:
            flushed = msg[5]
            for cache in chosen.caches.values():
                cache.clear()
        job.hooks.on_request(rid)
        rec: PipelineRequest = {
            "rid": rid,
            "warm": warm,
            "t_sent": t_sent,
            "t_start": time.perf_counter(),
            "worker": wid,
            "max_tokens": msg[4] if len(msg) > 4 else 1,
        }
        hook = prof.hook(None) if prof is not None and rid >= job.profile_skip else None
        step = chosen.step(job.arm, job.cfg, dev, hook=hook, arena=arena,
                           baseline_whitelisted=job.baseline_whitelisted)  # fmt: skip
        payload: Any = None
        try:
            encoded, idents = (
                (msg[3], None) if len(msg) > 3 else _request_payloads(load, payloads, rid)
            )
            images = load_inputs(step, encoded, idents)  # digests, hits, the decode (or header)
            rec["t_decoded"] = time.perf_counter()
            produced = recipe.producer_step(step, images, job.prefix)
            rec["feature_bytes"] = sum(feature_bytes(i) for i in produced.items)
            rec["image_tokens"] = sum(p.num_tokens for p in produced.plans)
            rec["patches"] = sum(p.num_patches for p in produced.plans)
            rec["deferred_images"] = sum(1 for d in produced.decisions if d.defer)
            rec["decision_reasons"] = sorted({d.reason for d in produced.decisions})
            rec["image_decisions"] = [
                [int(d.defer), d.raw_bytes, d.processed_bytes, int(d.encoded)]
                for d in produced.decisions
            ]
            rec["decodes"] = step.decodes  # (decoder, why) per image
            payload = produced.packed
        except Exception as exc:  # a bad request fails alone
            rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["t_produced"] = time.perf_counter()
        rec["items"] = payload
        recipe.send(step, rec, conn.send_bytes)  # the request's own pickle and the hop to rank 0
        conn.send((step.ledger.rows(), step.trail))
        if prof is not None:
            prof.finish(hook)


def _request_payloads(
    load: LoadJob | None, payloads: list[bytes], rid: int
) -> tuple[list[bytes], list[int | None]]:
    """Request ``rid``'s encoded images and their identities (``LoadJob.slots``)."""
    assert load is not None, "a request without images needs a load job"
    slots = load.slots(rid)
    return [payloads[k] for k, _ in slots], [ident for _, ident in slots]
