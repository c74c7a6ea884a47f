"""Adding a carrier touches two files (issue 20): the carrier's own module, which registers
its steps with the pipeline's registry, and the options (its name in ``MicroCarrier`` and
the module that registers it in ``CARRIER_MODULES``). The test copies the package, makes
exactly those two edits, checks that nothing else differs, and runs ``micro`` with the new
carrier in a real process."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CARRIER = '''"""A test carrier: features pickled inline, under another name."""
from kimi_bench.pipeline.carriers import register_carrier
from kimi_bench.pipeline.carriers.own import PickleCarrier


class Dummy(PickleCarrier):
    pass


register_carrier("dummy", Dummy)
'''


def _changed(a: Path, b: Path) -> list[str]:
    """Files that differ or exist on one side only (``__pycache__`` ignored)."""
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    out: list[str] = []

    def walk(c: filecmp.dircmp, rel: Path) -> None:
        out.extend(str(rel / n) for n in (*c.left_only, *c.right_only, *c.diff_files))
        for name, sub in c.subdirs.items():
            walk(sub, rel / name)

    walk(cmp, Path("."))
    return sorted(out)


@pytest.mark.slow
def test_a_new_carrier_is_two_files(tmp_path: Path) -> None:
    pkg = tmp_path / "kimi_bench"
    shutil.copytree(ROOT / "kimi_bench", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "dummy_carrier.py").write_text(CARRIER)  # file 1: the carrier
    base = pkg / "options" / "base.py"  # file 2: its name and module in the options
    text = base.read_text()
    text = text.replace('"sglang-pickle"]', '"sglang-pickle", "dummy"]', 1)
    modules = "CARRIER_MODULES: dict[str, str] = {"
    text = text.replace(modules, modules + '\n    "dummy": "kimi_bench.dummy_carrier",', 1)
    base.write_text(text)
    assert _changed(ROOT / "kimi_bench", pkg) == ["dummy_carrier.py", "options/base.py"]

    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", "micro", "--carrier", "dummy",
         "--synthetic", "1x64x48", "--ranks", "2", "--repeats", "2", "--warmup", "0",
         "--device", "cpu", "--output-dir", str(out)],
        capture_output=True, text=True, env=env, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["transport"] == "dummy"
    assert report["summary"]["bit_exact_all_repeats"] is True
    assert "dummy" in subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", "micro", "--help"],
        capture_output=True, text=True, env={**env, "COLUMNS": "200"}, timeout=120, check=True,
        cwd=tmp_path,
    ).stdout  # fmt: skip
