"""Package discovery for setuptools (metadata lives in pyproject.toml), and the build
record of a wheel.

Every package under ``kimi_bench/`` is found automatically, so a new subpackage ships
without editing a list; the built-in scenarios live in the top-level ``scenarios/`` folder
of the checkout and install as ``kimi_bench.scenarios`` (pyproject.toml alone cannot add a
remapped package to automatic discovery).

A build writes ``kimi_bench/_build_info.json`` into the package it builds (never into the
source tree): the version and, when built from a git checkout of kimi-bench, its commit
and whether the tree had uncommitted changes. An installed wheel's reports name that
commit (``kimi_bench.infra.environment.git_commit``); a checkout reads git itself."""

import json
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=HERE, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def build_info(version: str) -> dict:
    """What the wheel records about its source (no commit outside a git checkout of this
    folder, e.g. an unpacked sdist)."""
    top = _git("rev-parse", "--show-toplevel")
    commit = _git("rev-parse", "HEAD") if top and Path(top).resolve() == HERE else None
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no")) if commit else None
    return {"version": version, "commit": commit, "dirty": dirty}


class BuildPyWithInfo(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "kimi_bench" / "_build_info.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        info = build_info(self.distribution.get_version())
        target.write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")


setup(
    packages=[*find_packages(include=["kimi_bench", "kimi_bench.*"]), "kimi_bench.scenarios"],
    package_dir={"kimi_bench.scenarios": "scenarios"},
    cmdclass={"build_py": BuildPyWithInfo},
)
