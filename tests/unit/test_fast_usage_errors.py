"""A usage error comes back before any heavy import: the installed command answers a bad
option value, an unknown preset or scenario and a bad size without importing torch (it
took 4-15 s when torch came first). Checked with Python's own import log
(``PYTHONPROFILEIMPORTTIME``), not with a clock."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each case starts a kimi-bench process (~1 s)

CASES = [
    (["micro", "--ranks", "0"], "--ranks"),
    (["micro", "--synthetic", "4x640"], "COUNTxWIDTHxHEIGHT"),
    (["parity", "--preset", "kimi-k9"], "--preset"),
    (["parity", "--batch-size", "0"], "--batch-size"),
    (["serve-ab", "--image-resolution", "640-480"], "--image-resolution"),
    (["serve-ab", "--rates", "fast"], "bad rate"),
    (["run", "--scenario", "no-such-scenario"], "no-such-scenario"),
    # a missing --images folder: before the estimate, the progress line and any folder
    (["micro", "--images", "no/such/photos"], "--images: no/such/photos does not exist"),
    (["parity", "--images", "no/such/photos"], "--images: no/such/photos does not exist"),
]


def _command() -> list[str]:
    exe = shutil.which("kimi-bench")
    return [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]


def imported(stderr: str) -> set[str]:
    """Module names from Python's -X importtime log."""
    return {
        m.group(1).strip()
        for m in re.finditer(r"^import time:\s*\d+\s*\|\s*\d+\s*\|\s*(\S.*)$", stderr, re.M)
    }


@pytest.mark.parametrize(("args", "says"), CASES)
def test_usage_error_without_importing_torch(args: list[str], says: str, tmp_path):
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "COLUMNS": "200"}
    res = subprocess.run(
        [*_command(), *args, "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr[-2000:]
    assert says in res.stderr
    mods = imported(res.stderr)
    assert "pydantic" in mods  # the log was read: the options model was imported
    heavy = {m for m in mods if m.split(".")[0] in ("torch", "scipy", "matplotlib")}
    assert not heavy, f"imported before the usage error: {sorted(heavy)[:5]}"
    assert "estimate" not in res.stderr and "done in" not in res.stderr
    assert not (tmp_path / "o").exists()  # no output folder made for a refused run


@pytest.mark.slow
def test_a_portrait_size_typed_by_habit_gets_a_hint(tmp_path):
    """``--image-resolution 1024x1536`` (HEIGHTxWIDTH, sglang.bench_serving's habit) runs as
    portrait, so the command says so before anything runs; landscape and explicit orders
    say nothing."""

    def run(size: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*_command(), "serve-ab", "--image-resolution", size, "--launcher", "torchrun"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip

    res = run("1024x1536")
    text = " ".join(res.stderr.split())
    assert "size: --image-resolution 1024x1536 is 1024 wide and 1536 high (portrait)" in text
    assert "give 1536x1024" in text and "hxw:1024x1536" in text
    for size in ("1536x1024", "wxh:1024x1536", "hxw:1024x1536"):
        assert "portrait" not in run(size).stderr
