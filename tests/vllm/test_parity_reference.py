"""``parity --runtime vllm-0.33 --reference vllm`` in the vLLM environment: the one
pipeline's vLLM path is bit-identical to vLLM 0.33's own processor on the built-in corpus
and the by-design inputs (EXIF rotation, transparency); outside it, skipped with the reason."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.vllm_ref import Reference

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM is not installed (scripts/vllm-env.sh builds it)")


def test_parity_reference_vllm_is_identical_on_every_input(ref: Reference, tmp_path) -> None:
    out = tmp_path / "p"
    res = CliRunner().invoke(app, ["parity", "--runtime", "vllm-0.33", "--reference", "vllm",
                                   "--device", "cpu", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    s = json.loads((out / "report.json").read_text())["summary"]
    assert s["reference"]["differing"] == [] and s["reference"]["vllm_version"] == ref.version
    assert s["reference"]["identical"] == s["accepted"] > 20
    assert {"exif_orientation_6_640x480.jpg", "exif_orientation_8_300x200.jpg"} <= set(
        s["exif_rotated"]
    )
