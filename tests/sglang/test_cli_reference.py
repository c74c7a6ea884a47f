"""``kimi-bench parity --reference sglang`` from the command line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app

HAVE_SGLANG = importlib.util.find_spec("sglang") is not None


@pytest.mark.skipif(HAVE_SGLANG, reason="checks the message shown when sglang is missing")
def test_without_sglang_exits_2_with_the_install_hint(tmp_path: Path):
    res = CliRunner().invoke(
        app, ["parity", "--reference", "sglang", "--output-dir", str(tmp_path / "o")]
    )
    assert res.exit_code == 2
    assert "sglang-env.sh" in res.output and "requirements-sglang.txt" in res.output


@pytest.mark.sglang
@pytest.mark.slow
@pytest.mark.parametrize("preset", ["kimi-k3", "kimi-k2.5"])
def test_builtin_corpus_matches_the_runtime(tmp_path: Path, preset: str):
    if not HAVE_SGLANG:
        pytest.skip("sglang is not installed (scripts/sglang-env.sh builds the environment)")
    out = tmp_path / preset
    res = CliRunner().invoke(
        app,
        ["parity", "--reference", "sglang", "--preset", preset, "--device", "cpu",
         "--output-dir", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    ref = json.loads((out / "report.json").read_text())["summary"]["reference"]
    assert ref["differing"] == [] and ref["sglang_version"] == "0.5.23"
    # inputs the runtime raises on (a 2-D tensor; a float tensor for K2.5's eager path)
    assert set(ref["runtime_refused"]) <= {"tensor_2d_90x60", "tensor_float32_64x48"}
    assert ref["identical"] + len(ref["runtime_refused"]) == 27
