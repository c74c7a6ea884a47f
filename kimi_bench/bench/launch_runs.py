"""``micro`` and ``serve-ab`` under a launcher (``engine/launch.py``): the same processes and
the same report as ``bench/micro.py`` / ``bench/serve.py``, but each process starts only
what ``start.plan`` gives it. Under torchrun, global rank 0 hosts the producer(s), the load
generator and rank 0 (child processes, as with spawn) and returns the results; every other
rank runs its scheduler loop in this process and returns None.

With the spawn world (``World()``) the functions start everything on this host, as
``run_micro`` / ``run_serve_ab`` do. Both take options whose machine defaults are not yet
resolved: under torchrun ``--ranks`` defaults to WORLD_SIZE (``for_world``), not to the
machine profile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kimi_bench.bench.micro_build import Launched, MicroFailed, build_report, stage_record
from kimi_bench.bench.micro_records import Samples
from kimi_bench.bench.micro_setup import checked_job
from kimi_bench.bench.serve_http import ServeFailed
from kimi_bench.bench.serve_pipeline import Fixed, serve_pipeline
from kimi_bench.bench.serve_runs import Placement, ServeRun
from kimi_bench.domain.config import PreprocessConfig, resolve_config
from kimi_bench.engine import micro_worker
from kimi_bench.engine.launch import World, describe_launch
from kimi_bench.engine.micro_job import MicroJob, rounds
from kimi_bench.engine.micro_messages import Floor
from kimi_bench.engine.procs import Harness
from kimi_bench.engine.start import (
    explain_failure,
    for_world,
    harness_for,
    plan,
    rendezvous,
    run_here,
    sigterm_received,
)
from kimi_bench.infra.environment import host_load, resolve_device
from kimi_bench.infra.fault_hooks import load_hooks
from kimi_bench.infra.limits import interrupt_reason
from kimi_bench.options import MicroOptions, ServeOptions, rate_label, resolve_defaults
from kimi_bench.pipeline import carrier
from kimi_bench.report.model import Report
from kimi_bench.serving.trace import arrival_offsets


def launch_notes(world: World, ranks: int, device: str, transport: str) -> list[str]:
    """What the report says about the launch (``launch.describe_launch``)."""
    return describe_launch(world, ranks, device, transport)[1]


# ----------------------------------------------------------------------------- micro


def run_micro_on(
    world: World, opts: MicroOptions, progress: Callable[[int, int], None] | None = None
) -> Report | None:
    """``micro`` as this process's part of the run: the report at global rank 0, None
    elsewhere. ``--launches`` independent launches one after another, each with fresh
    processes (its own harness and rendezvous), its warm-up and its repeats; every record
    carries its launch. Raises MicroFailed (with the partial report) at rank 0 and
    RankFailed at the others when the run stops early."""
    load_start = host_load()
    dev = resolve_device(opts.device)
    opts, profile = resolve_defaults(for_world(opts, world), "micro", dev.type)
    todo = plan(world, opts.ranks or 1)
    cfg = resolve_config(opts.preset, opts.config)
    hooks = load_hooks(opts.fault_hooks)  # tests' faults; a bad spec fails before any start
    # usage errors here, before any start; the prefix and rendezvous come with the harness
    job = checked_job(opts, cfg, dev.type, todo.hosts_producers, world.ranks_per_node, hooks)
    if not todo.hosts_producers:
        rank = todo.in_process
        assert rank is not None
        for k in range(opts.launches):
            one = replace(job, init_file=rendezvous(world, _tag(k), ""))
            run_here(world, lambda one=one: micro_worker.rank_main(one, rank, None, None))
        return None
    state = _Launches(opts, job, progress)
    for k in range(opts.launches):
        if state.error is not None:
            break
        state.launch(world, todo, k)
    if len(state.floors) > 1 and state.floor.get("made_of"):
        state.floor["made_of"] += f" The lowest of the {len(state.floors)} launches' floors."
    config, notes = describe_launch(world, job.ranks, dev.type, opts.transport)
    launched = Launched(config, state.prefixes[0], state.runtime_prefixes)
    noted = opts.model_copy(update={"notes": (*notes, *opts.notes)})
    report = build_report(noted, cfg, dev, state.samples, state.floor, state.error,
                          state.leftovers, profile, load_start, control=state.control,
                          launched=launched)  # fmt: skip
    if len(state.prefixes) > 1:
        report.data["shm_prefixes"] = state.prefixes
        report.data["launch_floors_ms"] = state.floors  # the report's floor: their lowest
    if state.error:
        raise MicroFailed(state.error, report)
    return report


def _tag(launch: int) -> str:
    """The rendezvous tag of a launch (the first keeps the name runs always had)."""
    return "micro" if launch == 0 else f"micro/launch{launch}"


class _Launches:
    """What the launches of one micro run gather at rank 0: the records of every launch,
    the lowest of their floors, the error that stopped them, the segments left behind."""

    def __init__(
        self, opts: MicroOptions, job: MicroJob, progress: Callable[[int, int], None] | None
    ) -> None:
        self.opts, self.job, self.progress = opts, job, progress
        self.samples: Samples = {a: [] for a in opts.arms}
        self.control: Samples = {a: [] for a in opts.arms}
        self.floor = Floor()  # the launch whose floor is lowest (the floor is a minimum)
        self.floors: list[float | None] = []  # each launch's floor_ms, in order
        self.error: str | None = None
        self.leftovers: list[str] = []
        self.prefixes: list[str] = []
        self.runtime_prefixes: list[str] = []
        self.per_launch = len(rounds(job)) * len(opts.arms)
        self.done = 0

    def step(self, done: int, total: int) -> None:
        if self.progress:
            self.progress(self.done + done, self.per_launch * self.opts.launches)

    def launch(self, world: World, todo: Any, k: int) -> None:
        """Launch ``k``: fresh processes, its warm-up and repeats (the profiled rounds
        only in the last launch, so its traces are not overwritten)."""
        last = k == self.opts.launches - 1
        harness = harness_for(world)
        job = replace(self.job, prefix=harness.prefix, launch=k,
                      init_file=rendezvous(world, _tag(k), harness.init_file),
                      profile_dir=self.job.profile_dir if last else None)  # fmt: skip
        self.prefixes.append(harness.prefix)
        try:
            prod_end, rank0_end = harness.pipe()
            harness.start("producer", micro_worker.producer_main, job, prod_end)
            for r in todo.children:
                harness.start(f"rank{r}", micro_worker.rank_main, job, r,
                              rank0_end if r == 0 else None)  # fmt: skip
            floor = _collect_micro(harness, self.opts, job, (self.samples, self.control),
                                   self.step)  # fmt: skip
            self.floors.append(floor.get("floor_ms"))
            if _lower(floor, self.floor) or k == 0:
                self.floor = floor
        except KeyboardInterrupt as exc:
            self.error = interrupt_reason(exc)
        except Exception as exc:  # a failed rank (or node), a mismatch, a timeout
            self.error = explain_failure(world, str(exc), sigterm_received())
            if self.opts.launches > 1:
                self.error = f"launch {k + 1} of {self.opts.launches}: {self.error}"
        finally:
            pids = [p.pid for p in harness.procs.values() if p.pid is not None]
            used = carrier(self.opts.transport)
            self.leftovers += harness.stop() + used.leftovers(pids)
            self.runtime_prefixes += used.segment_prefixes(pids)
        self.done += self.per_launch


def _lower(floor: Floor, than: Floor) -> bool:
    """Whether ``floor`` measured less than ``than`` (a floor without a value never does)."""
    new, old = floor.get("floor_ms"), than.get("floor_ms")
    return new is not None and (old is None or new < old)


def _collect_micro(
    harness: Harness,
    opts: MicroOptions,
    job: MicroJob,
    into: tuple[Samples, Samples],
    progress: Callable[[int, int], None] | None,
) -> Floor:
    """Rank 0's repeats of one launch into ``into`` (the arms' samples, the control
    rounds' samples), numbered after the earlier launches' and marked with the launch;
    returns the floor."""
    floor = Floor()
    total, done = len(rounds(job)) * len(opts.arms), 0
    for kind, payload in harness.messages(opts.timeout_s, stop=sigterm_received):
        if kind == "floor":
            floor = payload
            continue
        done += 1
        if progress:
            progress(done, total)
        control = bool(payload.get("control"))
        skip = job.control_warmup if control else job.warmup
        if payload["iteration"] < skip or job.profiled(payload["iteration"], control):
            continue
        rec = stage_record(payload)
        per_launch = job.control_repeats if control else job.repeats
        rec["iteration"] = payload["iteration"] - skip + job.launch * per_launch
        rec["launch"] = job.launch
        into[control][payload["arm"]].append(rec)
        if rec["bit_exact"] is False:
            what = "control round" if control else "repeat"
            raise RuntimeError(
                f"{what} {rec['iteration']}: the owner's BF16 output differs between "
                f"eager and {payload['arm']} (torch.equal is False); no speedup is reported"
            )
    return floor


# -------------------------------------------------------------------------- serve-ab


def run_serve_on(
    world: World,
    opts: ServeOptions,
    on_run: Callable[[list[ServeRun]], None] | None = None,
) -> list[ServeRun]:
    """``serve-ab`` as this process's part of the run: every (rate, repeat, arm) pipeline
    in the same order on every rank; the runs at global rank 0, [] elsewhere. ``opts``
    as given (``serve_pipelines`` takes them resolved)."""
    opts = for_world(opts, world)
    device = resolve_device(opts.device).type
    opts, _ = resolve_defaults(opts, "serve_ab", device)
    return serve_pipelines(world, opts, resolve_config(opts.preset, opts.config), device, on_run)


def serve_pipelines(
    world: World,
    opts: ServeOptions,
    cfg: PreprocessConfig,
    device: str,
    on_run: Callable[[list[ServeRun]], None] | None = None,
) -> list[ServeRun]:
    """``run_serve_on`` of options fitted to the world with their machine defaults
    resolved (``for_world``, ``options.resolve_defaults``), their preset ``cfg`` and
    device type ``device``."""
    # resolved once for every pipeline: the preset, the device, the tests' faults (a bad
    # spec fails before any start)
    fixed = Fixed(cfg, device, load_hooks(opts.fault_hooks))
    runs: list[ServeRun] = []
    for i, rate in enumerate(opts.rates):
        for rep in range(opts.repeats):
            trace = arrival_offsets(
                rate, opts.requests or 1, opts.burstiness, opts.seed + 7919 * rep
            )
            for arm in opts.arms:
                if sigterm_received():
                    msg = explain_failure(world, "stopped between pipelines", terminated=True)
                    raise ServeFailed(msg, runs)
                at = Placement(rate, rate_label(rate), rep, i, tuple(trace))
                res = serve_pipeline(world, opts, arm, at, f"serve/{i}/{rep}/{arm}", fixed)
                if res is None:
                    continue
                runs.append(res)
                if on_run:
                    on_run(runs)
                if res.error and "timed out" not in res.error:
                    raise ServeFailed(f"{arm} at rate {rate_label(rate)}: {res.error}", runs)
    return runs
