"""Dummy workers for the process-harness fault tests: no torch, so a worker starts fast.
Each one makes a shared-memory segment under the run's prefix, as real workers do."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

SHM = Path("/dev/shm")


def make_segment(prefix: str, tag: str) -> Path:
    seg = SHM / f"{prefix}{tag}"
    seg.write_bytes(b"\0" * 64)
    return seg


def idle(prefix: str, tag: str, outbox: Any) -> None:
    """Make a segment, say so, then wait forever (a rank waiting on a peer)."""
    make_segment(prefix, tag)
    outbox.send("ready", os.getpid())
    while True:
        time.sleep(0.2)


def ticker(n: int, outbox: Any) -> None:
    for i in range(n):
        outbox.send("tick", i)


def raiser(outbox: Any) -> None:
    outbox.send("ready", os.getpid())
    raise ValueError("bad image in request 7")


def hard_exit(outbox: Any) -> None:
    outbox.send("ready", os.getpid())
    time.sleep(0.3)
    os._exit(3)


def echo_after_peer(peer_pid_file: str, outbox: Any) -> None:
    """A survivor: once its peer is gone, fail with gloo's error text (markup-like)."""
    outbox.send("ready", os.getpid())
    while not Path(peer_pid_file).exists():
        time.sleep(0.05)
    pid = int(Path(peer_pid_file).read_text())
    while Path(f"/proc/{pid}").exists() and _state(pid) not in ("Z", "X"):
        time.sleep(0.05)
    raise RuntimeError(
        "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Connection closed by peer"
    )


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def environment(key: str, outbox: Any) -> None:
    """Say what this worker sees: ``key`` in its environment, whether torch was imported
    before its work began, and its parent's pid."""
    import sys

    outbox.send("seen", (os.environ.get(key), "torch" in sys.modules, os.getppid()))
