"""The faults tests inject, as :class:`kimi_bench.infra.fault_hooks.FaultHooks`: a process that
raises at a repeat or before it maps the arena, a producer that dies or wedges on a
request, an answer whose stream breaks. Pass one to a job or backend, or name it to a
command as ``--fault-hooks tests.faults:Class:key=value,...`` (:func:`spec`); the command's
worker processes unpickle it, so this module must be importable there: the checkout's root
on ``sys.path`` (pytest's rootdir; :func:`importable_env` for a command run as a process).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kimi_bench.infra.fault_hooks import FaultHooks

ROOT = Path(__file__).resolve().parents[1]


def spec(cls: type[FaultHooks], **kwargs: Any) -> str:
    """The ``--fault-hooks`` value that makes ``cls(**kwargs)`` (values as Python literals)."""
    args = ",".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{cls.__module__}:{cls.__qualname__}" + (f":{args}" if args else "")


def importable_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the checkout's root first on PYTHONPATH, so that a command started as a
    process (whatever its working folder) can import this module."""
    paths = [str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


class CrashAtRepeat(FaultHooks):
    """micro: ``rank`` (None: the producer) raises after its part of round ``repeat``."""

    def __init__(self, repeat: int, rank: int | None = None) -> None:
        self.repeat, self.rank = repeat, rank

    def on_repeat(self, rank: int | None, iteration: int) -> None:
        if (rank, iteration) == (self.rank, self.repeat):
            who = "producer" if rank is None else f"rank:{rank}"
            raise RuntimeError(f"injected fault at {who}, iteration {iteration}")


class CrashBeforeAttach(FaultHooks):
    """micro: ``rank`` raises after it joined its group, before it maps the arena."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def before_attach(self, rank: int) -> None:
        if rank == self.rank:
            raise RuntimeError(f"injected fault at rank {rank} before it maps the arena")


class DieAtRequest(FaultHooks):
    """serve: the producer that takes request ``rid`` ends at once with exit code 3 (no
    clean-up: a hard crash, as a segfaulting worker would)."""

    def __init__(self, rid: int) -> None:
        self.rid = rid

    def on_request(self, rid: int) -> None:
        if rid == self.rid:
            os._exit(3)


class HangAtRequest(FaultHooks):
    """serve: the producer that takes request ``rid`` wedges for ``seconds``: the request
    must time out, not hang the run."""

    def __init__(self, rid: int, seconds: float = 3600.0) -> None:
        self.rid, self.seconds = rid, seconds

    def on_request(self, rid: int) -> None:
        if rid == self.rid:
            time.sleep(self.seconds)


STREAM_MODES = ("no_token", "malformed", "reset")


class BrokenStream(FaultHooks):
    """An answer's stream breaks as ``mode`` says: ``no_token`` (it ends without a
    token), ``malformed`` (a broken SSE data line instead of the tokens), ``reset`` (the
    connection drops before a token)."""

    def __init__(self, mode: str) -> None:
        if mode not in STREAM_MODES:
            raise ValueError(f"mode must be one of {', '.join(STREAM_MODES)}, got {mode!r}")
        self.mode = mode

    async def stream(self, events: AsyncIterator[str]) -> AsyncIterator[str]:
        if self.mode == "reset":
            raise ConnectionResetError("injected fault: connection reset before a token")
        if self.mode == "malformed":
            yield 'data: {"id": "chatcmpl-x", "choices": [{"delta": {"content": \n\n'


class _SlowerClock:
    """A step's clock that does extra work inside the measured region: when ``stage`` ends,
    it spins (a busy loop: real CPU time, not a sleep) for ``fraction`` of the time the
    step has taken so far in this process, then marks the stage again, so the stage, and
    the arm's total, end that much later."""

    def __init__(self, inner: Any, stage: str, fraction: float) -> None:
        self.inner, self.stage, self.fraction = inner, stage, fraction
        self.t0 = time.perf_counter()  # the step starts right after its barrier

    @property
    def marks(self) -> dict[str, float]:
        marks: dict[str, float] = self.inner.marks
        return marks

    def mark(self, stage: str) -> None:
        self.inner.mark(stage)  # after a device synchronize: the work so far is done
        if stage != self.stage:
            return
        end = self.marks[stage] + self.fraction * (self.marks[stage] - self.t0)
        while time.perf_counter() < end:
            pass
        self.inner.mark(stage)


class SlowerArm(FaultHooks):
    """micro: a slower build of ``arm`` (a test build for the revision A/B): every scheduler
    rank busy-loops at the end of its ``stage`` for ``fraction`` of the arm's time so far
    on that rank, so the arm's measured time grows by about ``fraction`` (a bit less: the
    stages after ``stage`` are not stretched). Other arms and the producer are untouched."""

    def __init__(self, fraction: float = 0.2, arm: str = "deferred",
                 stage: str = "owner_materialize") -> None:  # fmt: skip
        if not 0 < fraction <= 10:
            raise ValueError(f"fraction must be in (0, 10], got {fraction}")
        self.fraction, self.arm, self.stage = fraction, arm, stage

    def clock(self, arm: str, rank: int | None, hook: Any) -> Any:
        if arm != self.arm or rank is None:
            return hook
        return _SlowerClock(hook, self.stage, self.fraction)
