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
