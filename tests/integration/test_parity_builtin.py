import json

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app

runner = CliRunner()


@pytest.mark.slow
def test_builtin_corpus_is_bit_identical_on_cpu(tmp_path):
    out = tmp_path / "out"
    res = runner.invoke(app, ["parity", "--device", "cpu", "--ranks", "3", "--out", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    rows = report["results"]
    assert len(rows) >= 24
    assert all(r["error"] is None for r in rows)
    assert all(r["bit_exact_fp32"] and r["bit_exact_bf16"] for r in rows)
    modes = {r["mode"] for r in rows}
    for m in (
        "RGB",
        "RGBA",
        "LA",
        "L",
        "1",
        "P",
        "I;16",
        "CMYK",
        "tensor uint8 C3HW",
        "tensor uint8 C4HW",
        "tensor uint8 C1HW",
        "tensor uint8 HW",
        "tensor float32 C3HW",
    ):
        assert m in modes, m
    by_name = {r["name"]: r for r in rows}
    assert by_name["flip_deferred_28672x28"]["deferred"] is True
    assert by_name["flip_eager_28673x28"]["deferred"] is False
    assert by_name["tensor_float32_64x48"]["deferred"] is False
    assert {r["owner_rank"] for r in rows} == {0, 1, 2}
    assert report["environment"]["owner_device_emulated"] is True
    assert report["summary"]["contract_audit"]["ok"] is True
    # the PIL reference: exact for unresized inputs, within 25 levels for downscaled noise
    assert by_name["rgb_640x480"]["max_abs_diff_vs_pil"] == 0.0
    assert report["summary"]["max_abs_diff_vs_pil"] <= 25 / 127.5 + 1e-6
    # deferred-decode (proposed): every input bit-identical, encoded or routed with a reason
    assert all(r["decode_bit_exact_fp32"] and r["decode_bit_exact_bf16"] for r in rows)
    assert all(r["decode_reason"] for r in rows)
    paths = {r["name"]: r["decode_path"] for r in rows}
    for name in ("gradient_700x300", "p_96x64_transparency", "i16_200x100_16bit", "bw_150x77_1bit"):
        assert paths[name] == "encoded", name
    assert paths["tensor_c3_320x240"] == "raw"
    assert "no encoded form" in by_name["tensor_c3_320x240"]["decode_reason"]
    assert report["summary"]["deferred_decode"]["differing"] == []
