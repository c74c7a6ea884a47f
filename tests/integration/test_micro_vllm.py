"""``kimi-bench micro --runtime vllm-0.33`` through the installed command, on the CPU at a
tiny size: the run finishes, names the runtime and its carrier, and its copy ledger holds
vLLM's rows (the ring below 16 MiB, pinned staging and H2D of every item on every rank)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.navit import plan_resize


def _command() -> list[str]:
    exe = shutil.which("kimi-bench")
    return [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]


@pytest.mark.slow
def test_installed_micro_runs_the_vllm_profile_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "m"
    args = ["micro", "--runtime", "vllm-0.33", "--synthetic", "2x96x64", "--ranks", "2",
            "--repeats", "2", "--warmup", "0", "--launches", "1", "--control-repeats", "1",
            "--device", "cpu", "--out", str(out)]  # fmt: skip
    res = subprocess.run(
        [*_command(), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "micro"
    assert rep["config"]["runtime"] == "vllm-0.33" and rep["config"]["arms"] == ["vllm-uint8"]
    assert rep["config"]["runtime_profile"]["name"] == "vllm-0.33"
    assert rep["config"]["carrier_traits"]["name"] == "vllm-mq"
    assert "vllm-0.33" in (out / "report.md").read_text()
    assert rep["summary"]["verdict"].startswith("vllm-uint8 alone")  # nothing to compare with
    assert rep["summary"]["bit_exact_all_repeats"] is None
    ops = {(r["stage"], r["op"]): r for r in rep["arms"]["vllm-uint8"]["copies"]}
    plan = plan_resize(96, 64, get_preset("kimi-k3"))
    patches = 2 * 3 * plan.padded_width * plan.padded_height  # two images' uint8 patches
    assert ops[("producer", "patchify")]["bytes"] == patches
    assert ops[("broadcast", "ring_copy_in")]["count"] == 1  # far below 16 MiB: the ring
    assert ops[("broadcast", "ring_copy_out")]["count"] == 2  # one copy out per reader
    staging = ops[("pre_embed_move", "pinned_staging")]
    assert (staging["bytes"], staging["count"]) == (2 * patches, 2)  # every rank, every item
    assert not [n for n in rep["notes"] if "leftover shared-memory" in n]  # ring unlinked
    # the report reads back (it has one arm, so no speedup block): render redraws it, and
    # the gate refuses it by name rather than failing on the missing block
    shown = subprocess.run([*_command(), "render", str(out), "--html", str(tmp_path / "m.html")],
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    gated = subprocess.run([*_command(), "gate", str(out), "--allow-no-baseline"],
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert gated.returncode == 2 and "must hold the baseline and another arm" in gated.stderr
    assert "Traceback" not in gated.stderr
