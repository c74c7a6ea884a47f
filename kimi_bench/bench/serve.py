"""``serve-ab``: the same arrival trace through an eager and a deferred serving pipeline of
real processes, at each request rate; TTFT and throughput per arm, A/B deltas with
intervals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kimi_bench.bench.launch_runs import serve_pipelines
from kimi_bench.bench.serve_http import HttpServeOptions, Search, ServeFailed, run_serve_ab_http
from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.engine.launch import World
from kimi_bench.options import ServeOptions, rate_label
from kimi_bench.serving.trace import arrival_offsets
from kimi_bench.serving.workload import Workload

__all__ = ["ServeFailed", "arrival_offsets", "rate_label", "run_serve", "run_serve_ab"]


def run_serve(
    world: World,
    opts: ServeOptions,
    cfg: PreprocessConfig,
    device: str,
    on_run: Callable[[list[ServeRun]], None] | None = None,
    log_dir: Path | None = None,
    workload: Workload | None = None,
    search: Search | None = None,
) -> list[ServeRun]:
    """This process's part of serve-ab: under torchrun the in-process pipelines
    (``launch_runs.serve_pipelines``; [] at ranks other than 0), else every arm through
    HTTP (``run_serve_ab``). ``opts`` fitted to the world with their machine defaults
    resolved, ``cfg`` their preset, ``device`` their device type."""
    if world.launcher == "torchrun":
        return serve_pipelines(world, opts, cfg, device, on_run)
    return run_serve_ab(opts, on_run, log_dir, workload, search)


def run_serve_ab(
    opts: ServeOptions,
    on_run: Callable[[list[ServeRun]], None] | None = None,
    log_dir: Path | None = None,
    workload: Workload | None = None,
    search: Search | None = None,
) -> list[ServeRun]:
    """Every (rate, repeat, arm) on this host, through HTTP: the same seeded trace is sent
    by the OpenAI-compatible client to each ``--endpoint`` or, without endpoints, to one
    emulator server per arm (``kimi-bench serve``) started on loopback and stopped at the
    end. ``on_run`` sees the runs so far after each (for partial reports). Raises
    ServeFailed with the partial runs on a failure. Under torchrun the load generator runs
    in process instead (``launch_runs.run_serve_on``). ``opts`` must have its machine
    defaults resolved (``options.resolve_defaults``)."""
    http = HttpServeOptions.from_options(opts, log_dir, None, workload)
    return run_serve_ab_http(http, on_run, search)
