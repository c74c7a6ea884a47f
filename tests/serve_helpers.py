"""Helpers for tests that run ``kimi-bench serve`` as a real process: start it with a mark
in its environment, see its processes and any orphan it leaves (however brief), build
chat bodies and hostile images (a decompression-bomb PNG), read its log."""

from __future__ import annotations

import base64
import contextlib
import ctypes
import io
import os
import signal
import struct
import sys
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from kimi_bench.serving.launch import (
    ServerProcess,
    ServerStartError,
    child_pids,
    free_port,
    wait_healthy,
)

MARK = "KIMI_BENCH_TEST_MARK"
MODEL = "serve-test"
CHAT = "/v1/chat/completions"
_PR_SET_CHILD_SUBREAPER = 36


def mp_helpers() -> int:
    """The processes multiprocessing adds beside a run's workers: its resource tracker, and
    the forkserver where workers are forked from one (procs.worker_context)."""
    from kimi_bench.engine.procs import worker_context

    return 1 + (worker_context().get_start_method() == "forkserver")


def marked_processes(mark: str) -> list[int]:
    """Live processes started with ``MARK=mark`` in their environment (a test's server and
    every process under it, however deep; the test process itself never is)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"{MARK}={mark}".encode() in env and state != "Z":
            found.append(int(entry.name))
    return found


def _describe(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return f"{pid} (gone)"
    name, state = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1].split()[0]
    return f"{pid} {name} state {state}"


@contextlib.contextmanager
def adopting_orphans() -> Iterator[Callable[[], list[str]]]:
    """For the block, this test process is the child subreaper (Linux
    ``PR_SET_CHILD_SUBREAPER``): a process whose parent exits before it is re-parented
    here, not to init, and stays here (alive, or a zombie only this process reaps), so an
    orphan is seen however briefly it lived. Yields ``orphans()``: the processes adopted so
    far (children of this process that were not its children when the block began and
    that it did not start and reap itself: call it after the server was waited for).
    On exit the adopted are killed and reaped, and the subreaper flag is cleared."""
    if not sys.platform.startswith("linux"):
        pytest.skip("orphans are seen through PR_SET_CHILD_SUBREAPER (Linux only)")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.skip(f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}")
    before = set(child_pids())

    def orphans() -> list[str]:
        return [_describe(p) for p in sorted(set(child_pids()) - before)]

    try:
        yield orphans
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in set(child_pids()) - before:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def serve_process(
    tmp_path: Path, *extra: str, mark: str | None = None, ranks: int = 1, workers: int = 1
) -> tuple[ServerProcess, str, str]:
    """``kimi-bench serve`` (not started yet) on a free port with ``MARK=mark`` in its
    environment; (process, base URL, mark)."""
    mark = mark or uuid.uuid4().hex
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "kimi_bench.cli.main", "serve", "--port", str(port)]
    argv += ["--ranks", str(ranks), "--processor-workers", str(workers), "--device", "cpu"]
    argv += ["--model", MODEL]
    env = {**os.environ, MARK: mark}
    log = tmp_path / f"serve-{mark[:8]}.log"
    proc = ServerProcess([*argv, *extra], url, log, start_timeout_s=300, env=env)
    return proc, url, mark


def jpeg(seed: int = 0, size: tuple[int, int] = (160, 120)) -> bytes:
    buf = io.BytesIO()
    Image.effect_noise(size, 40 + seed).convert("RGB").save(buf, "JPEG", quality=85)
    return buf.getvalue()


def chat_body(
    images: list[bytes], max_tokens: int = 1, model: str = MODEL, **extra: Any
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "what is this"}]
    for b in images:
        ref = "data:image/png;base64," + base64.b64encode(b).decode()
        parts.append({"type": "image_url", "image_url": {"url": ref}})
    msg = {"role": "user", "content": parts}
    return {"model": model, "messages": [msg], "max_tokens": max_tokens, **extra}


def png_bomb(width: int = 12000, height: int = 12000, rows: int = 100) -> bytes:
    """A valid black RGB PNG of ``width x height`` that is tiny on disk (12000x12000: a
    421 KB file, 432 MB decoded): one deflate block of ``rows`` zero rows, compressed once
    and repeated (a full flush makes each block stand alone)."""
    if height % rows:
        raise ValueError("height must be a multiple of rows")

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    raw = (b"\0" * (1 + 3 * width)) * rows  # filter byte 0, then the row's RGB bytes
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(raw) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.flush()
    adler = 1
    for _ in range(height // rows):
        adler = zlib.adler32(raw, adler)
    idat = b"\x78\xda" + block * (height // rows) + tail + struct.pack(">I", adler)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    head = b"\x89PNG\r\n\x1a\n"
    return head + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def healthy_or_fail(url: str, proc: Any, log: Path, what: str, timeout_s: float = 300.0) -> None:
    """Until ``url``'s ``/health`` answers 200 (``launch.wait_healthy``); a test failure
    naming ``what`` with the tail of its log when the process exits first or never answers."""
    try:
        wait_healthy(url, timeout_s, proc)
    except ServerStartError as exc:
        pytest.fail(f"{what}: {exc}\n{log.read_text(errors='replace')[-5000:]}")


def requests_by_outcome(metrics_text: str) -> dict[str, float]:
    from kimi_bench.serving.metrics import parse_metrics

    snap = parse_metrics(metrics_text)
    return {
        dict(labels)["outcome"]: v
        for (name, labels), v in snap.values.items()
        if name == "kimi_bench_requests_total"
    }
