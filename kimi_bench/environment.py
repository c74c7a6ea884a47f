"""The ``environment`` block every report carries: versions, device, commit, seed."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

import kimi_bench


def git_commit(start: Path | None = None) -> dict[str, Any]:
    """HEAD of the checkout kimi-bench runs from (or of the working directory).

    ``KIMI_BENCH_GIT_COMMIT`` wins: set it where the code runs from a copy without ``.git``
    (e.g. a remote GPU machine)."""
    forced = os.environ.get("KIMI_BENCH_GIT_COMMIT")
    if forced:
        return {"commit": forced, "dirty": os.environ.get("KIMI_BENCH_GIT_DIRTY") == "1"}
    for where in (start or Path.cwd(), Path(kimi_bench.__file__).resolve().parent):
        try:
            sha = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5
            )
            if sha.returncode != 0:
                continue
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=where,
                capture_output=True,
                text=True,
                timeout=5,
            )
            return {"commit": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
        except (OSError, subprocess.SubprocessError):
            continue
    return {"commit": "unknown", "dirty": None}


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


def environment(device: torch.device, preset: str, seed: int, **extra: Any) -> dict[str, Any]:
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
        "git": git_commit(),
        "preset": preset,
        "seed": seed,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }
