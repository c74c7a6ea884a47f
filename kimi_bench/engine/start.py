"""Starting this process's part of a run under its launcher (``launch.World``): the
options fitted to the world, the harness of the processes it starts, and a rank run in
this process. Apart from ``launch`` because it imports torch (through the carriers and
the harness); the CLI reads ``launch`` before any torch import."""

from __future__ import annotations

from typing import Any, TypeVar

from kimi_bench.engine.launch import World, check_launch, explain_failure, shield_sigterm
from kimi_bench.engine.procs import Harness
from kimi_bench.options import MicroOptions, ServeOptions
from kimi_bench.pipeline import arms, carrier

OptionsT = TypeVar("OptionsT", MicroOptions, ServeOptions)


def for_world(opts: OptionsT, world: World) -> OptionsT:
    """Under torchrun: ``ranks`` = WORLD_SIZE (a different --ranks is refused) and the shm
    carrier refused across nodes. Call before ``options.resolve_defaults``."""
    if world.launcher != "torchrun":
        return opts
    used, asked = carrier(opts.transport), tuple(arms(opts.arms))
    return opts.model_copy(update={"ranks": check_launch(world, opts.ranks, used, asked)})


class RankFailed(RuntimeError):
    """A rank that runs in this process (torchrun, rank > 0) stopped; the message says why."""


def run_here(world: World, fn: Any) -> None:
    """Run this process's rank (torchrun, rank > 0); a failure is a RankFailed that says
    what happened to the job."""
    try:
        fn()
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        raise RankFailed(explain_failure(world, f"{type(exc).__name__}: {exc}")) from None


def harness_for(world: World) -> Harness:
    """The harness of the processes this process starts (under torchrun, rank 0 keeps the
    agent's SIGTERM for the usual failure path: ``shield_sigterm``)."""
    shield_sigterm(world)
    return Harness(handle_sigterm=world.launcher != "torchrun")
