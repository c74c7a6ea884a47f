"""The suite's shared runs rely on ``--dist loadgroup``: every test marked with one
``xdist_group`` runs on one worker, so a module- or session-scoped run happens once. With
pytest 9.2 and pytest-xdist 3.8 the mark was silently ignored (xdist names the group in
``item._nodeid``, which pytest 9.2 no longer reads): the tiny ``kimi-bench run`` ran twice
and every shared run once per worker. This runs pytest as the suite does on a two-worker
sample and checks the groups held."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = """
import os, pytest
pytestmark = pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_one(i):
    print("WORKER", os.environ["PYTEST_XDIST_WORKER"])
"""


@pytest.mark.slow  # a pytest run with two workers of its own
def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist",
         "loadgroup", "-v", "-s", "-c", "/dev/null", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    passed = [line for line in res.stdout.splitlines() if "PASSED" in line]
    assert len(passed) == 6 and all("@shared" in line for line in passed), res.stdout
    assert len({line.split("]")[0] for line in passed}) == 1, passed  # one worker
