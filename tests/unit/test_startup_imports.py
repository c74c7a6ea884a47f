"""Start-up cost of the console script: ``--help`` and a light command's help load the CLI
and the options models, not the report package (numpy through ``infra.stats``) nor httpx,
scipy, matplotlib or torch; the test suite starts hundreds of ``kimi-bench`` processes.
Checked with Python's own import log (``PYTHONPROFILEIMPORTTIME``), not with a clock."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.unit.test_fast_usage_errors import imported

pytestmark = pytest.mark.slow  # each case starts a kimi-bench process

# what none of these start-ups needs: each is imported by the command body that uses it
HEAVY = ("kimi_bench.report", "numpy", "httpx", "scipy", "matplotlib", "torch")


def _command() -> list[str]:
    exe = shutil.which("kimi-bench")
    return [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]


@pytest.mark.parametrize(
    "args",
    [["--help"], ["gate", "--help"], ["compare", "--help"], ["import", "--help"],
     ["render", "--help"], ["serve-ab", "--help"]],
)  # fmt: skip
def test_help_loads_no_heavy_module(args: list[str], tmp_path):
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    res = subprocess.run(
        [*_command(), *args], capture_output=True, text=True, env=env, timeout=120, check=False,
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "kimi-bench" in res.stdout
    mods = imported(res.stderr)
    assert "kimi_bench.options" in mods  # the log was read: the options models were imported
    heavy = sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"imported at start-up: {heavy[:5]}"
