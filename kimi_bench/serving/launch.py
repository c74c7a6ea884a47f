"""Running a server app: in this process (:func:`serve`, blocking, stops cleanly on
SIGTERM/SIGINT), or as a child process
(:class:`ServerProcess`) that is up once ``/health`` answers. uvicorn serves the app."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import uvicorn

from kimi_bench import __version__


class ServerStartError(RuntimeError):
    """The server did not come up; the message says why (exit code, log tail, timeout)."""


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket (``port`` 0 = a free one, read it from getsockname())."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServerStartError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def port_was_taken(exc: ServerStartError) -> bool:
    """Whether a server did not start because its port was taken (``bind_socket``'s message,
    in its log tail): a port from :func:`free_port` can be taken by another process on
    this host before the child binds it."""
    return f": {os.strerror(errno.EADDRINUSE)}" in str(exc)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (for a child process to bind; when another process
    took it meanwhile, the child's start fails with :func:`port_was_taken`)."""
    with contextlib.closing(bind_socket(host, 0)) as s:
        return int(s.getsockname()[1])


class _ShortTracebacks(logging.Filter):
    """uvicorn logs a failed start-up as the app's whole traceback; keep its last line
    (the exception and its message), which says what went wrong."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if msg.startswith("Traceback (most recent call last)"):
            lines = [ln for ln in msg.strip().splitlines() if ln.strip()]
            record.msg, record.args = f"the app's start-up failed: {lines[-1]}", ()
        return True


class _Server(uvicorn.Server):
    """uvicorn's server that tells the app when it begins to stop (``app.state.
    begin_shutdown``, see ``server.create_app``) before it waits for open connections,
    so requests in flight end at once instead of being cancelled after the graceful
    timeout."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        app = self.config.app
        begin = getattr(getattr(app, "state", None), "begin_shutdown", None)
        if callable(begin):
            begin()
        await super().shutdown(sockets)


def _config(app: Any, log_level: str, graceful_timeout_s: float) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        server_header=False,
        headers=[("server", f"kimi-bench/{__version__}")],
        timeout_graceful_shutdown=max(1, round(graceful_timeout_s)),
        access_log=False,
    )


def serve(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    log_level: str = "warning",
    graceful_timeout_s: float = 5.0,
    sock: socket.socket | None = None,
) -> int | None:
    """Serve ``app`` until SIGTERM or SIGINT (main thread only); in-flight requests get
    ``graceful_timeout_s`` to finish, then the app's shutdown (backend.close) runs.
    Returns the signal number that stopped it, or None. Never re-raises the signal.
    ``sock``: a socket bound beforehand (by :func:`bind_socket`) instead of host/port."""
    sock = sock or bind_socket(host, port)
    server = _Server(_config(app, log_level, graceful_timeout_s))  # configures logging
    short = _ShortTracebacks()
    logging.getLogger("uvicorn.error").addFilter(short)
    caught: list[int] = []

    def note(sig: int, frame: FrameType | None) -> None:  # uvicorn re-raises after shutdown
        caught.append(sig)

    previous = {s: signal.signal(s, note) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock])
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        logging.getLogger("uvicorn.error").removeFilter(short)
        sock.close()
    if not server.started and not caught:
        raise ServerStartError("the server did not start (the app's start-up failed; see log)")
    return caught[0] if caught else None


def child_pids() -> list[int]:
    """This process's children, running or exited and not yet reaped (Linux:
    ``/proc/self/task/*/children``; empty elsewhere)."""
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError):
                pids.update(int(x) for x in (task / "children").read_text().split())
    return sorted(pids)


def _reap_children(grace_s: float) -> None:
    """Stop multiprocessing's forkserver (SIGKILL) and resource tracker and wait for them,
    then give any other child ``grace_s`` to exit and SIGKILL what still runs; every child
    is reaped."""
    from multiprocessing import forkserver, resource_tracker

    # the forkserver serves no worker any more (each was stopped and reaped by its
    # Harness); one still importing its preload (torch: seconds on a loaded host) reads
    # its pipe only afterwards, and its ``_stop`` below waits for it without a limit
    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # private, but the only way: each stops when its pipe closes, otherwise when this
    # process has exited (the tracker then outlives it for a moment; the forkserver would
    # wait for an exit that waits for it)
    helpers = (forkserver, "_forkserver"), (resource_tracker, "_resource_tracker")
    for helper in (getattr(module, name, None) for module, name in helpers):
        stop = getattr(helper, "_stop", None)
        if callable(stop):
            with contextlib.suppress(Exception):
                stop()
    deadline = time.monotonic() + grace_s
    for pid in child_pids():
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.01)


_reap_registered: list[float] = []


def reap_children_at_exit(grace_s: float = 5.0) -> None:
    """Make this process reap every child before it exits, multiprocessing's forkserver and
    resource tracker included (for ``kimi-bench serve``, which must leave no orphan, not even
    briefly).

    multiprocessing starts the tracker with the first semaphore (a Queue) and lets it end
    by itself once its parent has exited, so it outlives the parent for a moment. This
    registers a multiprocessing finalizer that runs last at exit (after every semaphore was
    released and daemon workers were stopped), stops the forkserver and the tracker and
    reaps them, then any other child (SIGKILL after ``grace_s``). Idempotent."""
    from multiprocessing import util

    if not _reap_registered:
        util.Finalize(None, _reap_children, args=(grace_s,), exitpriority=-100)
        _reap_registered.append(grace_s)


def wait_healthy(
    base_url: str, timeout_s: float = 60.0, proc: subprocess.Popen[Any] | None = None
) -> None:
    """Poll ``GET /health`` until it answers 200. ServerStartError on timeout or when
    ``proc`` exits first."""
    deadline = time.monotonic() + timeout_s
    url = base_url.rstrip("/") + "/health"
    last = "no answer yet"
    # one client for every poll (a client per poll builds a TLS context each time: CPU)
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise ServerStartError(f"the server process exited with code {proc.returncode}")
            try:
                r = client.get(url)
                if r.status_code == 200:
                    return
                last = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
    raise ServerStartError(f"{url} did not answer 200 within {timeout_s:g} s (last: {last})")


def _terminate_with_parent(parent: int) -> Callable[[], None]:
    """For ``Popen(preexec_fn=...)``: the server gets SIGTERM (and stops its pipeline
    cleanly) when the process that started it dies, also by SIGKILL (Linux
    PR_SET_PDEATHSIG; it survives the exec)."""

    def arm() -> None:
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was in place
            os._exit(1)

    return arm


class ServerProcess:
    """A server run as a child process in its own session (Ctrl-C in the terminal reaches
    only the parent, which stops it). Use as a context manager; ``stop`` sends SIGTERM,
    then SIGKILL after ``stop_timeout_s``. Output goes to ``log`` (a file)."""

    def __init__(
        self,
        argv: Sequence[str],
        base_url: str,
        log: Path,
        *,
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 15.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv, self.base_url, self.log = list(argv), base_url.rstrip("/"), log
        self.start_timeout_s, self.stop_timeout_s, self.env = start_timeout_s, stop_timeout_s, env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerProcess:
        """:meth:`spawn`, then :meth:`wait_ready`."""
        return self.spawn().wait_ready()

    def spawn(self) -> ServerProcess:
        """Start the child without waiting for it (several can start side by side)."""
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
                preexec_fn=_terminate_with_parent(os.getpid()),
            )
        return self

    def wait_ready(self) -> ServerProcess:
        """Until ``/health`` answers 200; ServerStartError (child stopped, log tail in the
        message) when it exits or does not answer in time."""
        try:
            wait_healthy(self.base_url, self.start_timeout_s, self.proc)
        except ServerStartError as exc:
            self.stop()
            tail = self.log.read_text(errors="replace").strip().splitlines()[-5:]
            raise ServerStartError(f"{exc}; log tail: {' | '.join(tail) or '(empty)'}") from None
        return self

    def stop(self) -> int | None:
        """Stop the child; its exit code (negative = killed by that signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
