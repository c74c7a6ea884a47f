"""A small harness for the multi-process scenarios: spawn workers, stream their
messages, notice a dead worker within a second, and always clean up (processes, shared
memory segments, rendezvous files), also on Ctrl-C."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimi_bench.transport import cleanup_segments, new_prefix


def worker_threads(processes: int) -> int:
    """Torch CPU threads per worker so that ``processes`` workers share the cores."""
    return max(1, (os.cpu_count() or 2) // max(1, processes))


def rank_device(kind: str, rank: int, ranks_per_node: int = 0) -> Any:
    """On CUDA runs the rank's local rank modulo the host's GPUs (one to one when there are
    enough, round robin otherwise; ``launch.rank_gpu``), else the CPU."""
    import torch

    from kimi_bench.bench.launch import rank_gpu

    if kind != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", rank_gpu(rank, torch.cuda.device_count(), ranks_per_node))


@contextlib.contextmanager
def gloo_rank(init_file: str, rank: int, world: int, device: Any) -> Iterator[Any]:
    """Join the gloo group of a run (file rendezvous, or torchrun's env:// store) on
    ``device``; yields the NCCL device group when every rank has a GPU of its own, else
    None (``launch.device_group``); leave on exit."""
    import torch
    import torch.distributed as dist

    from kimi_bench.bench.launch import device_group, join_gloo

    if device.type == "cuda":
        torch.cuda.set_device(device)
    join_gloo(init_file, rank, world)
    try:
        yield device_group(device, world)
    finally:
        dist.destroy_process_group()


class WorkerFailed(RuntimeError):
    """A worker raised or died; the message says which and why."""


def _term_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt("SIGTERM")


class Outbox:
    """What a worker uses to talk to the parent: ``outbox.send(kind, payload)``."""

    def __init__(self, name: str, q: Any) -> None:
        self.name = name
        self._q = q

    def send(self, kind: str, payload: Any) -> None:
        self._q.put((kind, self.name, payload, None))


def _child(name: str, fn: Callable[..., None], args: tuple[Any, ...], q: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        fn(*args, Outbox(name, q))
    except BaseException as exc:  # report anything, then exit non-zero
        q.put(("error", name, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        raise SystemExit(1) from None
    q.put(("exit", name, None, None))


@dataclass
class Harness:
    """Owns the worker processes of one run."""

    poll_s: float = 0.25
    prefix: str = field(default_factory=new_prefix)
    ctx: Any = field(default_factory=lambda: mp.get_context("spawn"))
    procs: dict[str, Any] = field(default_factory=dict)
    tmpdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kimibench_")))
    handle_sigterm: bool = True  # False: the caller's handler stays (launch.shield_sigterm)

    def __post_init__(self) -> None:
        self.queue = self.ctx.Queue()
        self._old_term: Any = None
        if self.handle_sigterm and threading.current_thread() is threading.main_thread():
            # SIGTERM (e.g. a CI timeout) takes the same clean-up path as Ctrl-C
            self._old_term = signal.signal(signal.SIGTERM, _term_to_interrupt)

    @property
    def init_file(self) -> str:
        return str(self.tmpdir / "rendezvous")

    def pipe(self) -> tuple[Any, Any]:
        return self.ctx.Pipe(duplex=True)

    def start(self, name: str, fn: Callable[..., None], *args: Any) -> None:
        p = self.ctx.Process(target=_child, args=(name, fn, args, self.queue), name=name)
        p.daemon = True
        p.start()
        self.procs[name] = p

    def messages(self, timeout_s: float) -> Iterator[tuple[str, Any]]:
        """Yield (kind, payload) from workers until all exited; raise on a failure or
        when nothing arrives for ``timeout_s``."""
        exited: set[str] = set()
        last = time.monotonic()
        while len(exited) < len(self.procs):
            try:
                kind, name, payload, tb = self.queue.get(timeout=self.poll_s)
            except queue.Empty:
                kind = "idle"
            if kind == "idle":
                for n, p in self.procs.items():
                    if n not in exited and p.exitcode not in (None, 0):
                        raise WorkerFailed(f"worker {n} died with exit code {p.exitcode}")
                if time.monotonic() - last > timeout_s:
                    raise WorkerFailed(f"no progress from any worker for {timeout_s:.0f} s")
                continue
            last = time.monotonic()
            if kind == "error":
                raise WorkerFailed(self._root_cause([(name, payload, tb)]))
            if kind == "exit":
                exited.add(name)
                continue
            yield kind, payload

    def _root_cause(self, errors: list[tuple[str, str, str]], grace_s: float = 1.0) -> str:
        """A failing worker takes its peers down with it (gloo read errors); collect what
        arrives within ``grace_s`` and name the first failure that is not such an echo."""
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                kind, name, payload, tb = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if kind == "error":
                errors.append((name, payload, tb))
        echoes = ("gloo", "Connection closed", "Connection reset", "Broken pipe", "EOFError")
        primary = next((e for e in errors if not any(x in e[1] for x in echoes)), errors[0])
        others = len(errors) - 1
        tail = f" ({others} other worker(s) failed after it)" if others else ""
        return f"worker {primary[0]} failed: {primary[1]}{tail}\n{primary[2]}"

    def stop(self) -> list[str]:
        """Terminate what still runs and remove leftovers; returns removed segments."""
        for p in self.procs.values():
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + 5
        for p in self.procs.values():
            p.join(timeout=max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join(timeout=2)
        removed = cleanup_segments(self.prefix)
        if self.tmpdir.exists():
            for f in self.tmpdir.glob("*"):
                f.unlink(missing_ok=True)
            self.tmpdir.rmdir()
        self.queue.close()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None
        return removed

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
