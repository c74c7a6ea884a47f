"""One serve-ab pipeline under the launcher: one arm through one trace, its processes
started as ``start.plan`` gives this process (under torchrun, global rank 0 hosts the
producers, the load generator and rank 0; any other rank runs its scheduler loop here),
its jobs made from the options, its messages turned into request records."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from kimi_bench.bench.serve_runs import Placement, RequestImages, ServeRun, from_pipeline
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.engine import serve_producer, serve_workers
from kimi_bench.engine.launch import World
from kimi_bench.engine.serve_job import LoadJob, PipelineJob
from kimi_bench.engine.standins import StandinCost
from kimi_bench.engine.start import (
    explain_failure,
    harness_for,
    plan,
    rendezvous,
    run_here,
    sigterm_received,
)
from kimi_bench.infra.fault_hooks import FaultHooks
from kimi_bench.infra.limits import interrupt_reason
from kimi_bench.options import ServeOptions


@dataclass(frozen=True)
class Fixed:
    """What every pipeline of a serve-ab run shares, resolved once."""

    cfg: PreprocessConfig
    device: str
    hooks: FaultHooks


def _serve_jobs(
    world: World,
    opts: ServeOptions,
    arm: str,
    arrivals: tuple[float, ...],
    fixed: Fixed,
) -> tuple[PipelineJob, LoadJob]:
    """One arm's pipeline job (its prefix and rendezvous left empty: the harness gives
    them) and the load generator's job of one trace."""
    load = LoadJob(
        arrivals=arrivals, warmup_requests=opts.warmup_requests,
        request_timeout_s=opts.request_timeout_s, resolution=opts.width_height,
        images_per_request=opts.images_per_request, image_format=opts.image_format,
        image_content=opts.image_content, unique_images=opts.unique_images, seed=opts.seed,
        repeat_share=opts.repeat_share,
    )  # fmt: skip
    job = PipelineJob(
        cfg=fixed.cfg, arm=arm, ranks=opts.ranks or 1,
        workers=opts.processor_workers, transport=opts.transport,
        device=fixed.device, runtime=opts.runtime_spec,
        cost=StandinCost.from_options(opts.standins), hooks=fixed.hooks, prefix="",
        init_file="", ranks_per_node=world.ranks_per_node, decoder=opts.decoder,
        baseline_whitelisted=opts.eager_baseline == "deferral-off",
        # a zero-copy slot per request of the trace
        arena_image=opts.width_height, image_count=opts.images_per_request,
        arena_requests=load.total,
        # torchrun's in-process pipeline writes no traces (the emulator's does: --profile)
        profile_dir=None, profile_requests=0, profile_skip=0,
    )  # fmt: skip
    return job, load


def serve_pipeline(
    world: World, opts: ServeOptions, arm: str, at: Placement, tag: str, fixed: Fixed
) -> ServeRun | None:
    """One arm through one trace (the one serve-ab pipeline loop), started per ``start.plan``."""
    job, load = _serve_jobs(world, opts, arm, at.arrivals, fixed)
    todo = plan(world, opts.ranks or 1)
    harness = harness_for(world) if todo.hosts_producers else None
    where = harness or SimpleNamespace(prefix="", init_file="")  # ranks > 0: no segments
    job = replace(job, prefix=where.prefix, init_file=rendezvous(world, tag, where.init_file))
    if harness is None:
        rank = todo.in_process
        assert rank is not None
        run_here(world, lambda: serve_workers.rank_main(job, load, rank, [], None, None, None))
        return None
    out = ServeRun(arm=arm, at=at)
    w, h = opts.width_height
    n = opts.images_per_request
    images = RequestImages(n, n * w * h, 0)  # encoded sizes: the load generator's own
    try:
        req_q, warm_evt = harness.ctx.Queue(), harness.ctx.Event()
        pipes = [harness.pipe() for _ in range(opts.processor_workers)]
        for r in todo.children:
            conns = [p[1] for p in pipes] if r == 0 else []
            harness.start(f"rank{r}", serve_workers.rank_main, job, load, r, conns, req_q, warm_evt)
        for w, (send_end, _) in enumerate(pipes):
            harness.start(
                f"producer{w}", serve_producer.producer_main, job, load, w, req_q, send_end
            )
        harness.start("loadgen", serve_producer.loadgen_main, load, req_q, warm_evt)
        quiet_s = opts.request_timeout_s + 120.0  # a stalled request times out first
        for kind, payload in harness.messages(quiet_s, stop=sigterm_received):
            if kind == "request" and not payload["warm"]:
                out.records.append(from_pipeline(payload, images))
            elif kind == "ledger":
                out.copies = payload
            elif kind == "arena":  # zero-copy start-up per rank (spawn only)
                out.arena.append(payload)
            elif kind == "trace_start":
                out.trace_start = payload
            elif kind == "stalled":
                out.error = f"{payload} request(s) timed out after {opts.request_timeout_s} s"
                break
    except KeyboardInterrupt as exc:
        out.error = interrupt_reason(exc)
    except Exception as exc:
        out.error = explain_failure(world, str(exc), sigterm_received())
    finally:
        out.leftover_segments = len(harness.stop())
    return out
