"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during ``micro``:
a partial report, a non-zero exit, no orphan processes, no shared-memory segments."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kimi_bench.pipeline.transport import SHM_DIR, list_segments

pytestmark = pytest.mark.slow


def _segments() -> set[str]:
    return {p.name for p in SHM_DIR.iterdir() if p.name.startswith("kimibench_")}


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_writes_partial_report_and_cleans_up(tmp_path):
    before = _segments()
    out = tmp_path / "m"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kimi_bench.cli.main",
            "micro",
            "--images",
            "2x320x240",
            "--ranks",
            "2",
            "--repeats",
            "10000",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.time() + 120
    # wait until repeats are running (the floor line is printed only at the end, so poll
    # for the workers' shared-memory segments instead)
    # only this run's segments (kimibench_<its pid>_...): other runs on the machine make theirs
    while time.time() < deadline and not {
        s for s in _segments() - before if s.startswith(f"kimibench_{proc.pid}_")
    }:
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    text = output.decode(errors="replace")
    assert proc.returncode == 1, text
    report = json.loads((out / "report.json").read_text())
    assert "interrupted" in report["summary"]["error"]
    assert report["summary"]["repeats_completed"] >= 1
    # the multiprocessing resource tracker exits once the parent's pipe closes
    for _ in range(50):
        if not _group_alive(proc.pid):
            break
        time.sleep(0.1)
    left = subprocess.run(
        ["ps", "-o", "pid,stat,args", "-g", str(proc.pid)], capture_output=True, text=True
    ).stdout
    assert not _group_alive(proc.pid), left
    assert list_segments(report["shm_prefix"]) == []  # only this run's own segments
