"""What a worker process runs first: ask to die with its parent, then unpickle and run its
work. Spawned children import only this module before ``die_with_parent`` is in place (it
imports nothing heavy: the worker's modules, torch among them, take seconds to import, and
a parent killed meanwhile would leave the child running that long). Keep it that way: a
test checks that importing it loads neither torch nor the rest of kimi-bench."""

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


def die_with_parent(parent_pid: int) -> None:
    """Make this process end when ``parent_pid`` (its parent) ends, however it ends.

    Linux: the kernel sends SIGKILL on the parent thread's exit (PR_SET_PDEATHSIG). Everywhere
    (and as a second guard): a daemon thread checks ``os.getppid()`` twice a second and
    exits when the process was re-parented."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the request was in place
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _child(name: str, work: bytes, plumbing: dict[int, Any], q: Any, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        fn, args = pickle.loads(work)
        for i, a in plumbing.items():
            args[i] = a
        fn(*args, Outbox(name, q))
    except BaseException as exc:  # report anything, then exit non-zero
        q.put(("error", name, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        raise SystemExit(1) from None
    q.put(("exit", name, None, None))
