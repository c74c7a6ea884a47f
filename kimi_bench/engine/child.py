"""What a worker process runs first: ask to die with its parent, then unpickle and run its
work. Spawned children import only this module before ``die_with_parent`` is in place (it
imports nothing heavy: the worker's modules, torch among them, take seconds to import, and
a parent killed meanwhile would leave the child running that long). Keep it that way: a
test checks that importing it loads neither torch nor the rest of kimi-bench. (Where the
forkserver starts workers, it has imported those modules once, before any fork.)"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from typing import Any

_PR_SET_PDEATHSIG = 1
_WATCHDOG_S = 0.5


class Outbox:
    """What a worker uses to talk to the parent: ``outbox.send(kind, payload)``."""

    def __init__(self, name: str, q: Any) -> None:
        self.name = name
        self._q = q

    def send(self, kind: str, payload: Any) -> None:
        self._q.put((kind, self.name, payload, None))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return True


def die_with_parent(launcher_pid: int) -> None:
    """Make this process end when ``launcher_pid`` (the process that started it) ends,
    however it ends.

    A spawned worker's parent is the launcher; a worker forked by the forkserver (Linux:
    ``procs.worker_context``) has the forkserver as its parent, and the forkserver exits
    when the launcher does (it reads EOF on the launcher's end of a pipe), so watching the
    parent covers both. Linux: the kernel sends SIGKILL on the parent thread's exit
    (PR_SET_PDEATHSIG). Everywhere (and as a second guard): a daemon thread checks twice a
    second that the parent is the same and the launcher still exists, and exits if not."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    parent = os.getppid()

    def watched() -> bool:
        if os.getppid() != parent or parent == 1:
            return False
        return parent == launcher_pid or _alive(launcher_pid)

    if not watched():  # the launcher died before the request was in place
        os._exit(1)

    def watch() -> None:
        while watched():
            time.sleep(_WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _child(
    name: str,
    work: bytes,
    plumbing: dict[int, Any],
    q: Any,
    launcher_pid: int,
    environ: dict[str, str],
) -> None:
    die_with_parent(launcher_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    # a forked worker starts with the forkserver's environment: take the launcher's as it
    # was at start(), as a spawned worker would
    if environ != os.environ:
        os.environ.clear()
        os.environ.update(environ)
    try:
        fn, args = pickle.loads(work)
        for i, a in plumbing.items():
            args[i] = a
        fn(*args, Outbox(name, q))
    except BaseException as exc:  # report anything, then exit non-zero
        q.put(("error", name, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        raise SystemExit(1) from None
    q.put(("exit", name, None, None))
