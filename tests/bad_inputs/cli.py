"""Running the installed ``kimi-bench`` as a user does, for the bad-input tests: a real
process, its exit code and its console text; plus the places to write that fail (a full
device, a full file system) and small input folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

KIMI_BENCH = shutil.which("kimi-bench") or str(Path(sys.executable).parent / "kimi-bench")
FULL = Path("/dev/full")  # every write fails with ENOSPC: a full disk for one file


def kimi(
    *args: str,
    timeout: float = 600,
    prefix: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``kimi-bench ARGS`` (``prefix``: a wrapper such as :func:`on_tiny_tmpfs`; ``env``:
    variables added to this process's environment)."""
    return subprocess.run(
        [*prefix, KIMI_BENCH, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def flat(res: subprocess.CompletedProcess[str]) -> str:
    """stdout and stderr as one line of single spaces (messages fold at 80 columns)."""
    return " ".join((res.stdout + res.stderr).split())


def needs_dev_full() -> None:
    if not FULL.is_char_device():
        pytest.skip("needs /dev/full")


def on_tiny_tmpfs(where: Path, size: str = "12k") -> list[str]:
    """A command prefix that runs the command with a ``size`` tmpfs mounted on ``where``,
    in a mount namespace of its own (``unshare -m``: nothing is mounted for anyone else
    and it vanishes with the command); skips where that is not allowed (not root)."""
    where.mkdir(parents=True, exist_ok=True)
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'
    prefix = ["unshare", "-m", "sh", "-c", script, "sh", size, str(where)]
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
    return prefix


def png_folder(
    folder: Path, names: Sequence[str] = ("a.png",), size: tuple[int, int] = (40, 30)
) -> Path:
    """A folder of small distinct RGB PNGs."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(len(names))
    for name in names:
        arr = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        Image.fromarray(arr).save(folder / name, "PNG")
    return folder
