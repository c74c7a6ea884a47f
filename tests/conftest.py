"""Shared test set-up. The suite runs in parallel (pytest-xdist: ``addopts`` in
pyproject.toml has ``-n auto --dist loadgroup``, so ``python -m pytest -q`` is parallel as
the README writes it). What every test may rely on, and what it must do itself:

- **Workers.** ``-n auto`` starts one worker per CPU plus one (``KB_TEST_WORKERS=N``
  sets N, ``-n 0`` runs in this process). A run that names test ids only
  (``pytest tests/x.py::test_y``) stays in this process. Each worker is a process of its
  own: session fixtures run once per worker. Tests that share an expensive module or
  session fixture can keep together with ``@pytest.mark.xdist_group("name")``.
- **Shared runs.** An expensive run several tests read is a session fixture in a group:
  ``tiny_run`` (one tiny ``kimi-bench run``: console, report folder, ``--append-jsonl``
  line) with ``@pytest.mark.xdist_group("tiny_run")``; add yours the same way.
- **Files.** Use ``tmp_path`` / ``tmp_path_factory`` (unique per worker and test), never a
  fixed path; a command run without ``--output-dir`` writes under ``reports/runs/`` in a
  folder of its own (``cli.output``).
- **Shared memory.** kimi-bench names segments ``kimibench_<pid>_<run>_...``: unique per
  process. Judge only your own run's segments (``leftover_segments(before)`` below ignores
  the ones the SIGKILL tests leave on purpose); ``shm_prefix`` gives a test that makes
  segments itself a unique prefix.
- **Ports.** Let the OS choose (``bind_socket(host, 0)`` / ``free_port()`` in
  ``kimi_bench.serving.launch``); never a fixed port.
- **Environment.** Each worker has the environment pytest was started with (xdist's own
  ``COLUMNS``/``LINES`` are taken back), so commands fold their messages as they would.
- **Signals.** A test that sends SIGINT must not depend on the disposition it inherits (a
  shell starts a background job with SIGINT ignored): use the ``sigint_default`` fixture
  when this process receives it, ``preexec_fn=default_sigint`` (or ``popen_kw``) when a
  child does.
- **Speed.** Assert behaviour, not that something is fast: the machine may be shared and
  loaded, and other workers run beside yours. Wait for an event of the run (a progress
  line, a file, a request answered) rather than for a fixed time. Timing belongs in
  ``kimi-bench micro`` / ``serve-ab``. A test that runs a whole command in a process of
  its own (seconds of CPU: torch, a pipeline) is ``@pytest.mark.slow``, so that
  ``-m "not slow"`` stays a loop of about a minute.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# numpy's OpenBLAS starts a thread pool at import (0.05 CPU-s per process): the suite starts
# hundreds of kimi-bench processes and none of them multiplies matrices with numpy, so the
# test processes and their children use one BLAS thread (set before torch imports numpy).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
# Segments a test leaves behind on purpose (the SIGKILL tests: "the next run reaps them")
# carry this in their prefix, so that other tests running at the same time never count
# them as their own leftovers.
DELIBERATE_ORPHAN = "_orphan-by-test_"


def golden_images_dir() -> Path | None:
    """The runtime's golden images live in ../shared/golden/images beside the checkout
    (or wherever KIMI_BENCH_GOLDEN points)."""
    env = os.environ.get("KIMI_BENCH_GOLDEN")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared" / "golden"]:
        if (cand / "images").is_dir():
            return cand / "images"
    return None


def kimibench_segments() -> set[str]:
    """Every kimi-bench segment in /dev/shm now (of any run)."""
    shm = Path("/dev/shm")
    return {p.name for p in shm.iterdir() if p.name.startswith("kimibench_")}


def leftover_segments(before: set[str]) -> list[str]:
    """New segments whose creating process is gone: what a finished run left behind.
    Segments of other runs still active on the machine (live pids) are not ours to judge,
    nor those another test leaves on purpose (``DELIBERATE_ORPHAN``)."""
    out = []
    for name in kimibench_segments() - before:
        if DELIBERATE_ORPHAN in name:
            continue
        try:
            pid = int(name.split("_")[1])
        except (IndexError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            out.append(name)
        except PermissionError:
            continue
    return out


def default_sigint() -> None:
    """``preexec_fn`` for a child that must take SIGINT as Ctrl-C (Python turns it into
    KeyboardInterrupt only when SIGINT is not ignored at its start)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# keyword arguments of subprocess.Popen/run for a child that will be sent SIGINT
popen_kw: dict[str, Any] = {"preexec_fn": default_sigint}


@pytest.fixture
def sigint_default() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this process for the test (as in an interactive
    Python), whatever disposition pytest inherited; the previous one is restored after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


TINY_SCENARIO = """
[run]
device = "cpu"
[parity]
images = "{images}"
ranks = 2
[micro]
synthetic = "1x96x64"
arms = ["eager", "deferred"]
ranks = 2
repeats = 3
warmup = 0
[serve_ab]
rates = ["inf"]
requests = 3
ranks = 2
processor_workers = 1
image_resolution = "96x64"
warmup_requests = 0
unique_images = 2
"""


@dataclass(frozen=True)
class TinyRun:
    """One ``kimi-bench run`` of a tiny scenario, as CI runs it: piped, ``--format json``,
    ``--append-jsonl`` to a file that held one line before. ``lines``: stderr, each with
    whether the process was still running when it was read."""

    code: int
    stdout: str
    lines: list[tuple[str, bool]]
    out: Path
    jsonl: Path


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> TinyRun:
    """Shared by every test that reads a whole run (its console, files, history line):
    mark them ``@pytest.mark.xdist_group("tiny_run")`` so that one worker runs it once."""
    root = tmp_path_factory.mktemp("tiny-run")
    images = root / "imgs"
    images.mkdir()
    for i, size in enumerate([(64, 48), (40, 30)]):
        Image.new("RGB", size, (10 * i, 80, 160)).save(images / f"im{i}.png")
    sc = root / "sc.toml"
    sc.write_text(TINY_SCENARIO.format(images=images))
    jsonl = root / "dash" / "runs.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_text('{"kind": "earlier"}\n')  # appended to, never replaced
    exe = shutil.which("kimi-bench") or str(Path(sys.executable).parent / "kimi-bench")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["KIMI_BENCH_PROGRESS_S"] = "0.5"
    argv = [exe, "run", "--scenario", str(sc), "--format", "json", "--append-jsonl", str(jsonl)]
    with subprocess.Popen(
        [*argv, "--out", str(root / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, cwd=root,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        out_text: list[str] = []
        reader = threading.Thread(target=lambda: out_text.append(proc.stdout.read()))  # type: ignore[union-attr]
        reader.start()
        lines = [(line.rstrip("\n"), proc.poll() is None) for line in proc.stderr]
        reader.join(600)
        code = proc.wait(timeout=600)
    return TinyRun(code, "".join(out_text), lines, root / "out", jsonl)


@pytest.fixture
def shm_prefix() -> str:
    """A segment prefix no other process or test uses (kimi-bench's own form)."""
    return f"kimibench_{os.getpid()}_{uuid.uuid4().hex[:8]}_"


# what the worker processes of xdist get set that this process did not have (COLUMNS=80,
# LINES=24): restored in each worker, so that a command a test runs sees the environment
# the test run was started with (an 80-column COLUMNS folds the commands' messages)
_WORKER_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["kb_env"] = {k: os.environ.get(k) for k in _WORKER_ENV}


def pytest_configure(config: pytest.Config) -> None:
    env = getattr(config, "workerinput", {}).get("kb_env")
    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: KB_TEST_WORKERS if set; 0 (this process) when only test ids are named;
    else one worker per usable CPU plus one (many tests wait on processes and sockets: on
    the 2-core machine 3 workers ran the fast loop in 76 s where 2 took 85 s)."""
    env = os.environ.get("KB_TEST_WORKERS")
    if env:
        return int(env)
    if config.args and all("::" in a for a in config.args):
        return 0
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
