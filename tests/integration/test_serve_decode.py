"""``serve-ab`` with the deferred-decode arm (proposed, not in the runtime): requests carry
encoded images already; the arm's producers read headers only and its owners decode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from tests.integration.test_http_emulator import _post, emulator, jpeg
from tests.unit.test_deferred_decode import _corrupt_png

pytestmark = pytest.mark.slow


def test_serve_ab_runs_the_arm_and_compares_it_with_deferred(tmp_path: Path):
    out = tmp_path / "sab"
    args = ["serve-ab", "--rates", "inf", "--requests", "4", "--ranks", "2", "--resolution",
            "320x240", "--image-content", "blank", "--warmup-requests", "1", "--device", "cpu",
            "--arms", "eager,deferred,deferred-decode", "--out", str(out),
            # the blank payloads are byte-identical: sglang-0.5.23's preprocess cache would
            # hit every repeat and skip its staging copies; this compares first sights
            "--no-preprocess-cache"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "report.json").read_text())
    rows = {r["arm"]: r for r in rep["results"]}
    for r in rows.values():
        assert r["completed"] == 4 and r["failed"] == 0
    # encoded JPEG bytes cross the carriers instead of raw pixels
    assert rows["deferred-decode"]["bytes_moved"] < rows["deferred"]["bytes_moved"]
    assert "deferred-decode_vs_deferred" in rep["ab"]["inf"]
    assert any("deferred-decode is a PROPOSED arm" in n for n in rep["notes"])
    copies = [c for c in rep["copies"] if c.get("arm") == "deferred-decode"]
    decodes = [c for c in copies if c["op"] == "decode"]
    assert decodes and {c["stage"] for c in decodes} == {"owner_h2d"}
    # which decoder each measured image got, and why: the owners' decodes for this arm
    by_arm = rep["decodes"]
    assert sum(by_arm["deferred-decode"].values()) == 4
    assert all(k.startswith("pil: no CUDA") for k in by_arm["deferred-decode"])
    assert sum(by_arm["eager"].values()) == 4


def test_the_emulated_server_fails_only_the_request_an_owner_cannot_decode():
    truncated = jpeg(8, (320, 240))
    truncated = truncated[: len(truncated) // 2]  # no end marker: routed, the producer fails it
    with emulator("deferred-decode", ranks=2, workers=1) as (url, _backend, dead):
        first = _post(url, [jpeg(1)])
        at_producer = _post(url, [truncated])
        at_owner = _post(url, [_corrupt_png()])  # the header vouches; the pixels do not
        after = _post(url, [jpeg(2)])
    assert first.status_code == 200 and after.status_code == 200
    assert at_producer.status_code == 400
    assert "OSError: image file is truncated" in at_producer.json()["error"]["message"]
    assert at_owner.status_code == 400
    assert "the owner could not decode image" in at_owner.json()["error"]["message"]
    assert not dead
