"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during ``micro``:
a partial report, a non-zero exit, no orphan processes, no shared-memory segments."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from kimi_bench.pipeline.transport import list_segments
from tests.conftest import popen_kw

pytestmark = pytest.mark.slow


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_writes_partial_report_and_cleans_up(tmp_path):
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
        env=os.environ | {"KIMI_BENCH_PROGRESS_S": "0.2"},
        **popen_kw,  # SIGINT is Ctrl-C in the child, whatever pytest inherited
    )
    assert proc.stdout is not None
    # wait until measured repeats are done, whatever the host's load: the plain progress
    # line (piped: every 0.2 s) counts the rounds of every arm, warm-up and control rounds
    # included ("micro: micro 24/20006 repeats, ..."); 20 of them hold measured repeats
    seen: list[str] = []
    for raw in proc.stdout:
        seen.append(raw.decode(errors="replace"))
        m = re.search(r"(\d+)/\d+ repeats", seen[-1])
        if m and int(m.group(1)) >= 20:
            break
    assert proc.poll() is None, "".join(seen)  # still running: the Ctrl-C lands mid-run
    os.killpg(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    text = "".join(seen) + output.decode(errors="replace")
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
