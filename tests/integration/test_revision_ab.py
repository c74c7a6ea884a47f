"""``kimi-bench ab`` end to end, as CI runs it: the installed command, two executables, real
micro launches on tiny sizes. The same build twice passes; a test build whose deferred arm
does several times more real work (scripts/slower-build.sh, the SlowerArm fault seam)
fails with exit 1 and names the metric. The slowdown is far above the threshold, and there
are 3 launch pairs (with 2, a t interval has one degree of freedom: a 6x slower build was
"inconclusive" on a loaded CI machine), so that the verdict does not hang on the host's
load (the measured detection limits are in reports/calibration/cpu-revision-ab/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = ["--device", "cpu", "--ranks", "1", "--synthetic", "1x64x64", "--repeats", "3",
        "--warmup", "0", "--max-regression", "0.5"]  # fmt: skip


def _kimi_bench() -> str:
    return shutil.which("kimi-bench") or str(Path(sys.executable).parent / "kimi-bench")


def _ab(base: str, cand: str, out: Path, *more: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [_kimi_bench(), "ab", "--base", base, "--candidate", cand, "--out", str(out), *TINY,
         *more],
        capture_output=True, text=True, env=env, cwd=out.parent, timeout=1200, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_ab_passes_an_aa_run_and_fails_a_slower_test_build(tmp_path: Path):
    kb = _kimi_bench()
    # an A/A run passes at any spread under a 50% threshold: 2 launch pairs, none added
    same = _ab(kb, kb, tmp_path / "aa", "--launches", "2", "--max-launches", "2")
    assert same.returncode == 0, same.stderr[-2000:]
    assert "ab PASS" in same.stdout + same.stderr
    doc = json.loads((tmp_path / "aa" / "report.json").read_text())
    assert doc["base"]["commit"] == doc["candidate"]["commit"]
    assert len(doc["launches"]) == 4 and all(la["bit_exact"] for la in doc["launches"])

    slower = tmp_path / "kimi-bench-slower"
    subprocess.run(["bash", str(REPO / "scripts" / "slower-build.sh"), str(slower), "5", kb],
                   check=True)  # fmt: skip
    slow = _ab(kb, str(slower), tmp_path / "slow", "--launches", "3")
    text = slow.stdout + slow.stderr
    assert slow.returncode == 1, text[-2000:]
    assert "ab FAIL: regression in" in text
    report = json.loads((tmp_path / "slow" / "report.json").read_text())
    assert report["failed_metrics"] and all(
        f"{m}: +" in text and "REGRESSION" in text for m in report["failed_metrics"]
    )
    assert f"regression in {', '.join(report['failed_metrics'])}" in text


@pytest.mark.slow
def test_a_git_ref_is_built_once_into_its_own_environment(tmp_path: Path):
    from kimi_bench.ci.revisions import BUILT, ask_version, resolve, resolve_commit

    head = resolve_commit(REPO, "HEAD")
    assert head is not None
    rev = ask_version(resolve("base", "HEAD", REPO, tmp_path))
    assert (rev.source, rev.commit, rev.env["KIMI_BENCH_GIT_COMMIT"]) == ("git ref", head, head)
    assert rev.version.startswith("kimi-bench ") and Path(rev.command[0]).is_relative_to(tmp_path)
    marker = tmp_path / head / BUILT
    built_at = marker.stat().st_mtime_ns
    # the revision's own package, not this checkout's (no checkout on its path)
    where = subprocess.run(
        [str(Path(rev.command[0]).parent / "python"), "-c",
         "import kimi_bench, torch; print(kimi_bench.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    ).stdout  # fmt: skip
    assert Path(where.strip()).is_relative_to(tmp_path / head / "venv")
    again = resolve("candidate", head, REPO, tmp_path)  # the same commit: reused, not rebuilt
    assert again.command == rev.command and marker.stat().st_mtime_ns == built_at
