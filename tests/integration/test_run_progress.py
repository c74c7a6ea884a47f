"""``kimi-bench run`` piped (as in CI): progress lines reach stderr while the run is
still going, naming the part and the steps, with an estimate at the start and the time
taken at the end. Read through a real pipe from a subprocess; no timing is asserted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

pytestmark = pytest.mark.slow

SCENARIO = """
[run]
device = "cpu"
[parity]
images = "{images}"
ranks = 2
[micro]
synthetic = "1x96x64"
arms = ["eager", "deferred"]
ranks = 2
repeats = 3
warmup = 0
[serve_ab]
rates = ["inf"]
requests = 3
ranks = 2
processor_workers = 1
image_resolution = "96x64"
warmup_requests = 0
"""


def test_piped_run_prints_progress_before_it_ends(tmp_path: Path):
    images = tmp_path / "imgs"
    images.mkdir()
    for i, size in enumerate([(64, 48), (40, 30)]):
        Image.new("RGB", size, (10 * i, 80, 160)).save(images / f"im{i}.png")
    sc = tmp_path / "sc.toml"
    sc.write_text(SCENARIO.format(images=images))
    exe = shutil.which("kimi-bench")
    cmd = [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]
    env = {**os.environ, "KIMI_BENCH_PROGRESS_S": "0.5"}
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(
        [*cmd, "run", "--scenario", str(sc), "--out", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    lines, seen_running = [], []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith("run: ") and proc.poll() is None:
                seen_running.append(line.strip())
    finally:
        proc.wait(timeout=600)
    text = "\n".join(lines)
    assert proc.returncode in (0, 1), text[-3000:]
    assert lines and lines[0].startswith("run: parity, micro, serve-ab, gate and index; estimate ~")
    # plain progress lines arrived while the process was still running, for every part
    for part in ("parity", "micro", "serve-ab", "gate and index"):
        assert any(s.startswith(f"run: {part}") for s in seen_running), (part, text[-3000:])
    assert any(" repeats" in s and "elapsed" in s and "left" in s for s in seen_running)
    assert any(line.startswith("run: done in ") and "(estimate " in line for line in lines)
    assert "\x1b[" not in text  # a pipe gets plain text, no terminal codes
