from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


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
    Segments of other runs still active on the machine (live pids) are not ours to judge."""
    out = []
    for name in kimibench_segments() - before:
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
