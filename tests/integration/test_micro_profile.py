"""``micro --profile DIR`` as a user runs it: the installed command writes a Chrome trace per
process with the pipeline's stage names, the report names them, and the profiled repeats
stay out of the statistics (issue 32)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _kimi(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kimi-bench") or f"{sys.executable} -m kimi_bench.cli.main"
    return subprocess.run([*exe.split(), *args], capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


def _stages(trace: Path) -> set[str]:
    doc = json.loads(trace.read_text())  # valid JSON, the Chrome trace event format
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    return {e["name"] for e in doc["traceEvents"] if str(e.get("name", "")).startswith("stage:")}


@pytest.mark.slow  # a whole micro run with the profiler in three processes
def test_micro_profile_writes_a_trace_per_process_named_in_the_report(tmp_path: Path) -> None:
    prof, out = tmp_path / "prof", tmp_path / "out"
    res = _kimi("micro", "--synthetic", "1x96x64", "--ranks", "2", "--repeats", "3",
                "--launches", "2", "--warmup", "0", "--control-repeats", "0", "--device", "cpu",
                "--profile", str(prof), "--profile-repeats", "1",
                "--output-dir", str(out))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in prof.iterdir()) == [
        "producer.trace.json", "rank0.trace.json", "rank1.trace.json"
    ]  # fmt: skip
    assert {"stage:producer", "stage:serialize"} <= _stages(prof / "producer.trace.json")
    assert {"stage:broadcast", "stage:owner_materialize"} <= _stages(prof / "rank0.trace.json")
    assert "stage:start" not in _stages(prof / "rank0.trace.json")  # the clock's zero
    report = json.loads((out / "report.json").read_text())
    assert report["profiles"] == sorted(str(p) for p in prof.iterdir())
    assert any("producer.trace.json" in n and "not in the statistics" in n
               for n in report["notes"])  # fmt: skip
    for arm in ("eager", "deferred"):  # the profiled round is not a measured repeat
        assert report["arms"][arm]["total_ms"]["n"] == 6  # 2 launches (traces: the last)
