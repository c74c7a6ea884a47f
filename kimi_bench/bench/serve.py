"""``serve-ab``: the same arrival trace through an eager and a deferred serving pipeline of
real processes, at each request rate; TTFT and throughput per arm, A/B deltas with
intervals."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kimi_bench.bench.procs import Harness
from kimi_bench.bench.serve_workers import ServeJob, loadgen_main, producer_main, rank_main
from kimi_bench.bench.standins import StandinCost
from kimi_bench.config import PreprocessConfig, resolve_config
from kimi_bench.environment import resolve_device
from kimi_bench.options import ServeOptions, rate_label

__all__ = ["ServeFailed", "arrival_offsets", "rate_label", "run_pipeline", "run_serve_ab"]


def arrival_offsets(
    rate: float, n: int, burstiness: float = 1.0, seed: int = 0
) -> tuple[float, ...]:
    """Seconds from the trace start for ``n`` requests.

    ``rate`` = inf sends everything at once; otherwise gaps are gamma distributed with
    shape ``burstiness`` and mean 1/rate (burstiness 1 = Poisson arrivals)."""
    if n < 0:
        raise ValueError("request count must be >= 0")
    if math.isinf(rate):
        return (0.0,) * n
    if rate <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    rng = np.random.default_rng([seed, int(rate * 1000)])
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    return tuple(float(x) for x in np.cumsum(gaps))


class ServeFailed(RuntimeError):
    def __init__(self, message: str, runs: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.runs = runs


def run_pipeline(
    opts: ServeOptions, cfg: PreprocessConfig, arm: str, arrivals: tuple[float, ...]
) -> dict[str, Any]:
    """One arm through one arrival trace; returns its per-request records."""
    dev = resolve_device(opts.device)
    harness = Harness()
    job = ServeJob(
        cfg=cfg,
        arm=arm,
        ranks=opts.ranks or 1,
        workers=opts.processor_workers,
        transport=opts.transport,
        device=dev.type,
        resolution=opts.width_height,
        images_per_request=opts.images_per_request,
        image_format=opts.image_format,
        image_content=opts.image_content,
        unique_images=opts.unique_images,
        seed=opts.seed,
        arrivals=arrivals,
        warmup_requests=opts.warmup_requests,
        cost=StandinCost(**opts.standins.model_dump()),
        prefix=harness.prefix,
        init_file=harness.init_file,
        request_timeout_s=opts.request_timeout_s,
        runtime=opts.runtime,
        fault=opts.fault,
    )
    records: list[dict[str, Any]] = []
    out: dict[str, Any] = {"arm": arm, "records": records, "trace_start": None, "error": None}
    try:
        req_q, warm_evt = harness.ctx.Queue(), harness.ctx.Event()
        pipes = [harness.pipe() for _ in range(opts.processor_workers)]
        for r in range(job.ranks):
            conns = [p[1] for p in pipes] if r == 0 else []
            harness.start(f"rank{r}", rank_main, job, r, conns, req_q, warm_evt)
        for w, (send_end, _) in enumerate(pipes):
            harness.start(f"producer{w}", producer_main, job, w, req_q, send_end)
        harness.start("loadgen", loadgen_main, job, req_q, warm_evt)
        budget = opts.request_timeout_s + 120.0
        for kind, payload in harness.messages(budget):
            if kind == "request" and not payload["warm"]:
                records.append(payload)
            elif kind == "ledger":
                out["copies"] = payload
            elif kind == "arena":  # zero-copy start-up per rank (not in any request)
                out.setdefault("arena", []).append(payload)
            elif kind == "trace_start":
                out["trace_start"] = payload
            elif kind == "stalled":
                out["error"] = f"{payload} request(s) timed out after {opts.request_timeout_s} s"
                break  # the ranks are done; stop() below ends any wedged producer
    except KeyboardInterrupt:
        out["error"] = "interrupted by the user (Ctrl-C)"
    except Exception as exc:
        out["error"] = str(exc).splitlines()[0]
    finally:
        out["leftover_segments"] = len(harness.stop())
    return out


def run_serve_ab(
    opts: ServeOptions,
    on_run: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (rate, repeat, arm) pipeline; ``on_run`` sees the runs so far after each
    (for partial reports). Raises ServeFailed with the partial runs on a failure.
    ``opts`` must have its machine defaults resolved (``options.resolve_defaults``)."""
    cfg = resolve_config(opts.preset, opts.config)
    runs: list[dict[str, Any]] = []
    for i, rate in enumerate(opts.rates):
        for rep in range(opts.repeats):
            trace = arrival_offsets(
                rate, opts.requests or 1, opts.burstiness, opts.seed + 7919 * rep
            )
            for arm in opts.arms:
                res = run_pipeline(opts, cfg, arm, trace)
                res.update(
                    rate=rate,
                    rate_label=rate_label(rate),
                    repeat=rep,
                    rate_index=i,
                    arrivals=list(trace),
                )
                runs.append(res)
                if on_run:
                    on_run(runs)
                if res["error"] and "timed out" not in res["error"]:
                    raise ServeFailed(f"{arm} at rate {rate_label(rate)}: {res['error']}", runs)
    return runs
