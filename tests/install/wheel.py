"""Build kimi-bench's wheel from a copy of the checkout and list what it lacks.

The expected contents come from the source tree itself (every file under ``kimi_bench/``
and the top-level ``scenarios/`` installed as ``kimi_bench/scenarios/``), not from a list
written here, so a package or data file that the build leaves out shows up as a named
missing file."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What a wheel build reads from the checkout; the rest (tests, reports) is not packaged.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "kimi_bench", "scenarios")
# Folders in the source tree that hold the installed package's files, and where they land.
PACKAGED = {"kimi_bench": "kimi_bench", "scenarios": "kimi_bench/scenarios"}
_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", "*.egg-info")


def copy_sources(dest: Path, repo: Path = REPO) -> Path:
    """The build inputs of ``repo`` copied to ``dest`` (no caches, no egg-info)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in BUILD_INPUTS:
        src = repo / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_NOT_SOURCE)
        else:
            shutil.copy2(src, dest / name)
    return dest


def build_wheel(src: Path, out: Path, timeout_s: float = 600) -> Path:
    """``pip wheel --no-deps`` of ``src`` into ``out``; the one wheel it wrote. Without
    build isolation when setuptools is importable here (no download), as ``pip wheel .``
    otherwise."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)]
    if importlib.util.find_spec("setuptools") is not None:
        cmd.insert(4, "--no-build-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    wheels = sorted(out.glob("kimi_bench-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {out}, found {wheels}"
    return wheels[0]


def expected_files(src: Path) -> set[str]:
    """Every file the installed package must have, as paths inside the wheel."""
    out = set()
    for folder, target in PACKAGED.items():
        for p in (src / folder).rglob("*"):
            parts = p.relative_to(src / folder).parts
            if p.is_file() and "__pycache__" not in parts and p.suffix not in (".pyc", ".pyo"):
                out.add(f"{target}/{'/'.join(parts)}")
    return out


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {n for n in zf.namelist() if not n.endswith("/")}


def missing_from_wheel(src: Path, wheel: Path) -> list[str]:
    """Source files (``expected_files``) that the wheel does not contain, sorted."""
    return sorted(expected_files(src) - wheel_files(wheel))
