"""Starting this process's part of a run under its launcher (``launch.World``): the
options fitted to the world, what it starts (``plan``), the harness of those processes,
the rendezvous string its ranks get, a rank run in this process, and what a failure
says under torchrun. Apart from ``launch`` because it imports torch (through the
carriers and the harness); the CLI reads ``launch`` before any torch import."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from typing import Any, TypeVar

from kimi_bench.engine.launch import ENV_PREFIX, LaunchError, World
from kimi_bench.engine.procs import QUIET, Harness
from kimi_bench.options import MicroOptions, ServeOptions
from kimi_bench.pipeline import arms, carrier

OptionsT = TypeVar("OptionsT", MicroOptions, ServeOptions)


def check_launch(
    world: World, ranks: int | None, transport: Any, arms: tuple[Any, ...] = ()
) -> int:
    """The rank count of the run; refuses what cannot work across nodes (``transport``
    and ``arms``: the carrier and arm objects, ``pipeline.carrier`` / ``pipeline.arms``)."""
    if world.launcher == "spawn":
        return int(ranks or 1)
    for a in arms:
        if a.needs_arena:
            raise LaunchError(
                f"the {a.name} arm maps one shared-memory arena that kimi-bench creates for "
                "the processes it starts on one host; run it without torchrun (--launcher spawn)"
            )
    if ranks is not None and ranks != world.size:
        raise LaunchError(
            f"--ranks {ranks} but torchrun started {world.size} ranks (WORLD_SIZE); "
            "leave --ranks out or make them equal"
        )
    if not transport.spans_nodes and world.spans_nodes:
        raise LaunchError(
            f"--transport {transport.name} needs every rank on one node, but this job spans "
            f"{world.nodes} nodes; use --transport pickle (what the runtime uses across nodes)"
        )
    return world.size


def for_world(opts: OptionsT, world: World) -> OptionsT:
    """Under torchrun: ``ranks`` = WORLD_SIZE (a different --ranks is refused) and the shm
    carrier refused across nodes. Call before ``options.resolve_defaults``."""
    if world.launcher != "torchrun":
        return opts
    ranks = check_launch(world, opts.ranks, carrier(opts.transport), tuple(arms(opts.arms)))
    return opts.model_copy(update={"ranks": ranks})


@dataclass(frozen=True)
class Plan:
    """The processes this process starts: ``children`` ranks as child processes (with the
    producers and the load generator when ``hosts_producers``), or one rank run here."""

    children: tuple[int, ...]
    in_process: int | None
    hosts_producers: bool


def plan(world: World, ranks: int) -> Plan:
    if world.launcher == "spawn":
        return Plan(tuple(range(ranks)), None, True)
    if world.rank == 0:
        return Plan((0,), None, True)
    return Plan((), world.rank, False)


def rendezvous(world: World, tag: str, init_file: str) -> str:
    """The init string a rank process gets: the file (spawn) or ``env://<key>`` (torchrun),
    where the key is unique to this run and this group (several pipelines share a store)."""
    if world.launcher == "spawn":
        return init_file
    return f"{ENV_PREFIX}kimibench/{world.run_id}/{tag}"


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


# ------------------------------------------------------------------------ failures

_SIGTERM = {"received": False}


def _note_sigterm(signum: int, frame: Any) -> None:
    _SIGTERM["received"] = True


def shield_sigterm(world: World) -> None:
    """Under torchrun, the process of global rank 0 notes the agent's SIGTERM (sent when
    another rank of the job failed) instead of dying of it: its child processes get the
    same signal (one process group) and die, which ends the run through the usual failure
    path, so the partial report is still written. Other processes keep the default."""
    main = threading.current_thread() is threading.main_thread()
    if world.launcher == "torchrun" and world.rank == 0 and main:
        signal.signal(signal.SIGTERM, _note_sigterm)


def sigterm_received() -> bool:
    return _SIGTERM["received"]


_PEER_LOST = ("Connection closed", "Connection reset", "Broken pipe", "EOFError", "timed out")


def explain_failure(world: World, message: str, terminated: bool = False) -> str:
    """A clear first line for a failure; under torchrun it says when another rank (a node,
    or one of its processes) went away, or when the agent stopped this rank for it."""
    first = message.splitlines()[0] if message else "unknown failure"
    if world.launcher != "torchrun":
        return first
    where = f"rank {world.rank} on node {world.node_rank} of {world.nodes}"
    if terminated:
        return (
            f"torchrun stopped {where} (SIGTERM) because another rank of the job failed; "
            f"the run ends here ({first})"
        )
    if any(x in message for x in _PEER_LOST):
        return (
            f"lost contact with another rank of the torchrun job ({where}): a node or one "
            f"of its ranks stopped; the run ends here ({first})"
        )
    if first.startswith(QUIET) and world.size > 1:
        return (
            f"{first} ({where}): its ranks wait in collectives, so another rank of the "
            "torchrun job (a node, or one of its ranks) has probably stopped or hangs; the "
            "run ends here"
        )
    return first
