"""A small harness for the multi-process scenarios: spawn workers, stream their
messages, notice a dead worker within a second, and always clean up (processes, shared
memory segments, rendezvous files), also on Ctrl-C.

Workers die with their parent: on Linux each worker asks the kernel for SIGKILL when its
parent dies (``prctl(PR_SET_PDEATHSIG)``), and a watchdog thread in every worker exits
when its parent pid changes (the fallback elsewhere, and a second guard). So a SIGKILL of
the main process, which runs no clean-up, leaves no worker behind. What such a run leaves
in ``/dev/shm`` and the temp folder (names start ``kimibench_<pid>_``) is removed by the
next run (``reap_stale_runs``) once that pid is gone. Caveat: runs in other PID namespaces
that share ``/dev/shm`` (containers with ``--ipc=host``) look dead from here.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import pickle
import queue
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimi_bench.engine.child import _child
from kimi_bench.pipeline.transport import SHM_DIR, cleanup_segments, new_prefix

_RUN_NAME = re.compile(r"^kimibench_(\d+)_")


# imported once by the forkserver, before it forks a worker: each spawned worker used to
# import torch and the worker modules itself (about 1.3 s of CPU per worker)
_PRELOAD = [
    "torch",
    "kimi_bench.engine.micro_worker",
    "kimi_bench.engine.serve_workers",
    "kimi_bench.engine.serve_producer",
]


def worker_context() -> Any:
    """How workers start: forked from a forkserver that has imported torch and the worker
    modules once (Linux, where it exists), else spawned (a fresh interpreter each).
    Either way a worker starts from a clean process that has not run the launcher's
    code, threads or CUDA; ``KIMI_BENCH_START_METHOD=spawn`` forces spawn."""
    method = os.environ.get("KIMI_BENCH_START_METHOD", "forkserver")
    if method not in ("forkserver", "spawn"):
        raise ValueError(f"KIMI_BENCH_START_METHOD={method!r}: use forkserver or spawn")
    if method == "forkserver" and "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return mp.get_context("spawn")


def worker_threads(processes: int) -> int:
    """Torch CPU threads per worker so that ``processes`` workers share the cores."""
    return max(1, (os.cpu_count() or 2) // max(1, processes))


QUIET = "no progress from any worker"  # how a stalled wait's message begins
STOPPED = "stopped from outside while the workers ran"  # ``stop`` while no worker failed


class WorkerFailed(RuntimeError):
    """A worker raised or died; the message says which and why."""


def describe_exit(code: int | None) -> str:
    """``-9`` -> ``died from signal SIGKILL``; ``3`` -> ``died with exit code 3 ...``."""
    if code is not None and code < 0:
        try:
            return f"died from signal {signal.Signals(-code).name}"
        except ValueError:
            return f"died from signal {-code}"
    return f"died with exit code {code} without reporting an error"


def _new_prefix() -> str:
    # transport imports torch; workers import this module and need not pay for it
    return new_prefix()


def _term_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt("SIGTERM")


def _process_start(pid: int) -> float | None:
    """Start time (epoch s) of a live process, or None when it is gone (or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return 0.0  # alive, another user's
        return 0.0  # alive; no /proc to date it
    if fields[0] in ("Z", "X"):
        return None
    try:
        btime = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError, IndexError):
        return 0.0


def _stale(path: Path) -> bool:
    """Made by a kimi-bench run whose main process is gone (by the pid in its name; a
    reused pid is recognised by a process start later than the file)."""
    m = _RUN_NAME.match(path.name)
    if m is None or int(m.group(1)) == os.getpid():
        return False
    started = _process_start(int(m.group(1)))
    if started is None:
        return True
    try:
        return started > path.lstat().st_mtime + 1.0
    except OSError:
        return False


def reap_stale_runs(shm_dir: Path | None = None, tmp_dir: Path | None = None) -> list[str]:
    """Remove shared-memory segments and temp folders of dead kimi-bench runs; returns
    their names. Only ``kimibench_<pid>_*`` entries whose pid is gone are touched."""
    removed: list[str] = []
    tmp = tmp_dir or Path(tempfile.gettempdir())
    for folder, is_dir in ((shm_dir or SHM_DIR, False), (tmp, True)):
        try:
            entries = [p for p in folder.iterdir() if p.name.startswith("kimibench_")]
        except OSError:
            continue
        for p in entries:
            if not _stale(p):
                continue
            try:
                if is_dir and p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif not is_dir and p.is_file():
                    p.unlink()
                else:
                    continue
            except OSError:
                continue
            removed.append(p.name)
    return removed


class _NotPlain(Exception):
    pass


class _PlainPickler(pickle.Pickler):
    """Plain pickle that refuses what only travels at spawn time: plain pickle would copy
    a pipe end as a dead handle (queues and events refuse by themselves)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, mp_connection.Connection):
            raise _NotPlain(type(obj).__name__)
        return NotImplemented


def _plain_pickle(obj: Any) -> bytes | None:
    buf = io.BytesIO()
    try:
        _PlainPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except (_NotPlain, RuntimeError, TypeError, AttributeError, pickle.PicklingError):
        return None
    return buf.getvalue()


def _pack_work(fn: Callable[..., None], args: tuple[Any, ...]) -> tuple[bytes, dict[int, Any]]:
    """The worker's function and plain arguments as bytes, unpickled only after the child
    asked to die with its parent (unpickling imports the worker's modules: torch takes
    seconds, and a parent killed meanwhile would leave the child running that long); pipes,
    queues and events stay spawn-time arguments (``plumbing``, by position)."""
    plumbing = {i: a for i, a in enumerate(args) if _plain_pickle(a) is None}
    rest = [None if i in plumbing else a for i, a in enumerate(args)]
    blob = _plain_pickle((fn, rest))
    if blob is None:
        raise TypeError(f"worker function {fn!r} cannot be pickled")
    return blob, plumbing


@dataclass
class Harness:
    """Owns the worker processes of one run."""

    poll_s: float = 0.25
    prefix: str = field(default_factory=_new_prefix)
    ctx: Any = field(default_factory=worker_context)
    procs: dict[str, Any] = field(default_factory=dict)
    tmpdir: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix=f"kimibench_{os.getpid()}_"))
    )
    handle_sigterm: bool = True  # False: the caller's handler stays (start.shield_sigterm)

    def __post_init__(self) -> None:
        # what dead runs left behind (SIGKILL, power loss), removed before this one starts
        self.reaped = reap_stale_runs()
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
        work, plumbing = _pack_work(fn, args)
        p = self.ctx.Process(
            target=_child,
            args=(name, work, plumbing, self.queue, os.getpid(), dict(os.environ)),
            name=name,
        )
        p.daemon = True
        p.start()
        self.procs[name] = p

    def messages(
        self, timeout_s: float, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[str, Any]]:
        """Yield (kind, payload) from workers until all exited; raise on a failure, when
        nothing arrives for ``timeout_s``, or as soon as ``stop()`` is true (torchrun's
        SIGTERM: its agent kills this rank's process group 30 s later, so the partial
        report cannot wait for the workers to die of it)."""
        exited: set[str] = set()
        last = time.monotonic()
        while len(exited) < len(self.procs):
            try:
                kind, name, payload, tb = self.queue.get(timeout=self.poll_s)
            except queue.Empty:
                kind = "idle"
            if stop is not None and stop():  # checked at every message, not only when idle
                said = [(name, payload, tb)] if kind == "error" else []
                raise WorkerFailed(self._root_cause(said, nothing=STOPPED))
            if kind == "idle":
                for n, p in self.procs.items():
                    if n not in exited and p.exitcode not in (None, 0):
                        raise WorkerFailed(self._root_cause([]))
                if time.monotonic() - last > timeout_s:
                    raise WorkerFailed(f"{QUIET} for {timeout_s:.0f} s")
                continue
            last = time.monotonic()
            if kind == "error":
                raise WorkerFailed(self._root_cause([(name, payload, tb)]))
            if kind == "exit":
                exited.add(name)
                continue
            yield kind, payload

    def _root_cause(
        self,
        errors: list[tuple[str, str, str]],
        grace_s: float = 1.0,
        nothing: str = "a worker failed without a message",
    ) -> str:
        """A failing worker takes its peers down with it (gloo read errors); collect what
        arrives within ``grace_s`` and name the cause: a worker that died without a word
        (a signal, ``os._exit``, a segfault) first, else the first error that is not such
        an echo, else the first error; ``nothing`` when no worker said or showed anything."""
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                kind, name, payload, tb = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            if kind == "error":
                errors.append((name, payload, tb))
        reported = {e[0] for e in errors}
        silent = [
            (n, describe_exit(p.exitcode), "")
            for n, p in self.procs.items()
            if p.exitcode not in (None, 0) and n not in reported
        ]
        echoes = ("gloo", "Connection closed", "Connection reset", "Broken pipe", "EOFError")
        loud = [e for e in errors if not any(x in e[1] for x in echoes)]
        ranked = silent + loud + [e for e in errors if e not in loud]
        if not ranked:
            return nothing
        name, text, tb = ranked[0]
        what = text if silent and ranked[0] is silent[0] else f"failed: {text}"
        others = len(ranked) - 1
        tail = f" ({others} other worker(s) failed after it)" if others else ""
        return f"worker {name} {what}{tail}\n{tb}".rstrip()

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
                p.join(timeout=30)  # reaped, not left behind (SIGKILL ends it at once)
        removed = cleanup_segments(self.prefix)
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        self.queue.close()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None
        return removed

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
