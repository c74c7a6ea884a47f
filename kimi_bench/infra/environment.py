"""The ``environment`` block every report carries: versions, device, commit, seed, and the
host load at the start and end of the run.

Host load: take ``start = host_load()`` before a run and pass it to
``environment(..., load_start=start)`` when the report is built; the block then holds
``host_load = {"start": {...}, "end": {...}, "busy": bool, "warning": str | None}``
(``HostLoadRecord.as_dict``). Put ``HostLoadRecord.warning()`` into the report notes."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

import kimi_bench

BUILD_INFO = "_build_info.json"  # written into the package by a wheel build (setup.py)


def _git(where: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _checkout_commit(package: Path) -> dict[str, Any] | None:
    """The commit of the checkout the package runs from (``python cli.py``, an editable
    install): only when the package folder is that checkout's ``kimi_bench/``, so a
    virtual environment inside some other repository never lends it its commit."""
    top = _git(package, "rev-parse", "--show-toplevel")
    if not top or (Path(top).resolve() / "kimi_bench") != package:
        return None
    sha = _git(package, "rev-parse", "HEAD")
    if not sha:
        return None
    dirty = _git(package, "status", "--porcelain", "--untracked-files=no")
    return {"commit": sha, "dirty": bool(dirty), "source": "checkout"}


def build_info(package: Path | None = None) -> dict[str, Any] | None:
    """What the installed wheel recorded when it was built (version, commit, dirty), or
    None (a checkout, or a wheel built before it recorded this)."""
    path = (package or Path(kimi_bench.__file__).resolve().parent) / BUILD_INFO
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def git_commit(start: Path | None = None) -> dict[str, Any]:
    """The commit of the kimi-bench that runs, and where that was read (``source``):

    ``KIMI_BENCH_GIT_COMMIT`` wins (``env``: set it where the code runs from a copy without
    ``.git``, e.g. a remote GPU machine); then the checkout the package runs from
    (``checkout``); then the wheel's build record (``wheel``: the commit it was built from,
    null when it was not built from a checkout). ``start``: a folder to try as the
    checkout instead of the package's own (tests)."""
    forced = os.environ.get("KIMI_BENCH_GIT_COMMIT")
    if forced:
        return {
            "commit": forced,
            "dirty": os.environ.get("KIMI_BENCH_GIT_DIRTY") == "1",
            "source": "env",
        }
    package = Path(kimi_bench.__file__).resolve().parent
    found = _checkout_commit((start / "kimi_bench").resolve() if start else package)
    if found:
        return found
    info = build_info(package)
    if info is not None:
        return {
            "commit": info.get("commit") or "unknown",
            "dirty": info.get("dirty"),
            "source": "wheel",
            "built_version": info.get("version"),
        }
    return {"commit": "unknown", "dirty": None, "source": None}


@dataclass(frozen=True)
class HostLoad:
    """One snapshot of the host: load averages over 1, 5 and 15 minutes and usable CPUs."""

    load_1m: float
    load_5m: float
    load_15m: float
    cpus: int
    at: str  # ISO-8601 UTC time of the snapshot

    @property
    def busy(self) -> bool:
        """More runnable work than cores over the last minute (False when unknown)."""
        return self.load_1m > self.cpus  # NaN compares False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"busy": self.busy}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HostLoad:
        def num(k: str) -> float:
            return math.nan if d.get(k) is None else float(d[k])

        return cls(num("load_1m"), num("load_5m"), num("load_15m"), int(d["cpus"]), str(d["at"]))


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def host_load() -> HostLoad:
    """Snapshot now; the load averages are NaN where the OS does not report them."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        one = five = fifteen = math.nan
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return HostLoad(one, five, fifteen, usable_cpus(), now)


@dataclass(frozen=True)
class HostLoadRecord:
    """Host load at the start and at the end of a run (start is None when not taken)."""

    start: HostLoad | None
    end: HostLoad

    @property
    def busy(self) -> bool:
        return self.end.busy or (self.start is not None and self.start.busy)

    def warning(self) -> str | None:
        """A note for the report when the host was busy, else None."""
        if not self.busy:
            return None
        loads = [
            f"{s.load_1m:.1f} at {w}"
            for w, s in (("start", self.start), ("end", self.end))
            if s is not None
        ]
        return (
            f"busy host: 1-minute load average {', '.join(loads)} on {self.end.cpus} usable "
            "CPUs; other processes competed for the CPUs, so timings may be slower and noisier "
            "than on a quiet machine (rerun there before reading a regression into them)."
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "start": None if self.start is None else self.start.as_dict(),
            "end": self.end.as_dict(),
            "busy": self.busy,
            "warning": self.warning(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HostLoadRecord:
        start = d.get("start")
        return cls(
            None if start is None else HostLoad.from_dict(start), HostLoad.from_dict(d["end"])
        )


def record_host_load(start: HostLoad | None) -> HostLoadRecord:
    """Close a run's load record: ``start`` as taken before the run, the end snapshot now."""
    return HostLoadRecord(start, host_load())


def resolve_device(choice: str) -> torch.device:
    """``auto`` picks CUDA when present; asking for CUDA without one is a usage error."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but torch sees no CUDA device")
    if choice not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda; got {choice!r}")
    return torch.device(choice)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def environment(
    device: torch.device,
    preset: str,
    seed: int,
    *,
    load_start: HostLoad | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The block; ``host_load`` holds ``load_start`` (None when the caller took none) and a
    snapshot taken now, at the end of the run."""
    cuda = torch.version.cuda if torch.cuda.is_available() else None
    return {
        "package": "kimi-bench",
        "package_version": kimi_bench.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": cuda,
        "device": device.type,
        "device_name": device_name(device),
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "cpu_count": usable_cpus(),
        "git": git_commit(),
        "preset": preset,
        "seed": seed,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host_load": record_host_load(load_start).as_dict(),
        **extra,
    }
