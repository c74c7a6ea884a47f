"""Adding an arm or a carrier is its module plus its registration (issue 29): the test
copies the package, writes a toy arm and a toy carrier (each a module that registers
itself) and edits only the options (their names in the ``Literal`` lists and their modules
in ``ARM_MODULES`` / ``CARRIER_MODULES``) and the runtime profiles that have them (SGLang's
``SGLANG_ARMS`` / ``SGLANG_CARRIERS``), checks that nothing else differs, and runs both
through parity, micro and serve-ab in real processes with nothing else changed. The three
scenarios report the same recipe (the pipeline's step names) for the toy arm."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]

ARM = '''"""A test arm: the runtime's deferred path under another name, with no role."""
from kimi_bench.pipeline.arms import register_arm
from kimi_bench.pipeline.arms.base import Arm


class Toy(Arm):
    label = "a test arm"


register_arm("toy", Toy)
'''

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


def _register(base: Path) -> None:
    """The registration: names in the options' Literal lists, modules in their maps."""
    text = base.read_text()
    for old, new in (
        ('"deferred-decode", "vllm-uint8"]', '"deferred-decode", "vllm-uint8", "toy"]'),
        ('Carrier = Literal["shm", "pickle", "vllm-mq"]',
         'Carrier = Literal["shm", "pickle", "vllm-mq", "dummy"]'),
        ('"sglang-pickle", "vllm-mq"]', '"sglang-pickle", "vllm-mq", "dummy"]'),
        ("ARM_MODULES: dict[str, str] = {}",
         'ARM_MODULES: dict[str, str] = {"toy": "kimi_bench.toy_arm"}'),
        ("CARRIER_MODULES: dict[str, str] = {",
         'CARRIER_MODULES: dict[str, str] = {\n    "dummy": "kimi_bench.dummy_carrier",'),
    ):  # fmt: skip
        assert old in text, old
        text = text.replace(old, new, 1)
    base.write_text(text)


def _runtimes_have_them(runtime: Path) -> None:
    """Which runtimes have the new arm and carrier: SGLang's profiles (since vLLM became a
    second runtime, each profile names the arms and carriers it has; others are refused)."""
    text = runtime.read_text()
    for old, new in (
        ('"zero-copy", "deferred-decode")', '"zero-copy", "deferred-decode", "toy")'),
        ('"sglang-shm", "sglang-pickle")', '"sglang-shm", "sglang-pickle", "dummy")'),
    ):
        assert old in text, old
        text = text.replace(old, new, 1)
    runtime.write_text(text)


def _run(tmp: Path, *argv: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tmp)}
    out = tmp / f"out-{argv[0]}"
    res = subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", *argv, "--device", "cpu",
         "--output-dir", str(out)],
        capture_output=True, text=True, env=env, timeout=900, check=False, cwd=tmp,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_a_new_arm_and_a_new_carrier_run_through_every_scenario(tmp_path: Path) -> None:
    pkg = tmp_path / "kimi_bench"
    shutil.copytree(ROOT / "kimi_bench", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "toy_arm.py").write_text(ARM)
    (pkg / "dummy_carrier.py").write_text(CARRIER)
    _register(pkg / "options" / "base.py")
    _runtimes_have_them(pkg / "domain" / "runtime.py")
    assert _changed(ROOT / "kimi_bench", pkg) == [
        "domain/runtime.py", "dummy_carrier.py", "options/base.py", "toy_arm.py"
    ]  # fmt: skip
    images = tmp_path / "images"
    images.mkdir()
    Image.new("RGB", (64, 48), (200, 30, 90)).save(images / "a.png")
    Image.linear_gradient("L").resize((40, 30)).save(images / "b.png")

    parity = _run(tmp_path, "parity", "--images", str(images))
    toy = parity["summary"]["arms"]["toy"]
    assert toy == {"label": "a test arm", "inputs": 2, "all_bit_exact": True, "differing": []}
    assert all(r["arms"]["toy"]["bit_exact_bf16"] for r in parity["results"])

    micro = _run(tmp_path, "micro", "--arms", "eager,toy", "--carrier", "dummy", "--synthetic",
                 "1x64x48", "--ranks", "2", "--repeats", "2", "--launches", "1", "--warmup", "0",
                 "--control-repeats", "0")  # fmt: skip
    assert micro["config"]["transport"] == "dummy"
    assert micro["summary"]["bit_exact_all_repeats"] is True
    assert [r["bit_exact"] for r in micro["repeats"]["toy"]] == [True, True]

    serve = _run(tmp_path, "serve-ab", "--arms", "eager,toy", "--transport", "dummy",
                 "--request-rate", "inf", "--num-prompts", "3", "--warmup-requests", "1",
                 "--image-resolution", "64x48", "--ranks", "2")  # fmt: skip
    done = {r["arm"]: r["completed"] for r in serve["results"]}
    assert done == {"eager": 3, "toy": 3}, serve["results"]

    # one recipe: the same step names in the three scenarios
    recipes = [parity["recipe"]["deferred"], micro["recipe"]["toy"], serve["recipe"]["toy"]]
    assert recipes[0] == recipes[1] == recipes[2], recipes
    assert recipes[0]["rank"] == ["receive", "broadcast", "take", "rank_step", "release", "gather"]
    assert micro["recipe"]["eager"] == serve["recipe"]["eager"] == recipes[0]
