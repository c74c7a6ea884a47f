"""serve-ab as a user runs it, piped: the size given WIDTHxHEIGHT is the size generated
(sglang's HEIGHTxWIDTH order only with hxw:), said the same way on the console, and the
console tables stay within PIPE_TABLE_WIDTH."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.cli.tables import PIPE_TABLE_WIDTH
from kimi_bench.options import ServeOptions

pytestmark = pytest.mark.slow


def test_both_spellings_of_a_size_are_one_size() -> None:
    """WIDTHxHEIGHT, and sglang.bench_serving's HEIGHTxWIDTH behind its prefix, as serve-ab's
    options read them (the run below takes the prefixed one through a whole serve-ab)."""
    a = ServeOptions(image_resolution="96x64", device="cpu")
    b = ServeOptions(image_resolution="hxw:64x96", device="cpu")
    assert a.resolution == b.resolution == (96, 64)


def test_serve_ab_sizes_are_width_by_height(tmp_path):
    size = "hxw:64x96"
    out = tmp_path / "sab"
    res = CliRunner().invoke(
        app,
        ["serve-ab", "--rates", "inf", "--requests", "2", "--ranks", "2", "--processor-workers",
         "1", "--image-resolution", size, "--warmup-requests", "0", "--device", "cpu",
         "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "96x64 (width x height)" in res.output
    cfg = json.loads((out / "report.json").read_text())["config"]
    assert (cfg["width"], cfg["height"], cfg["resolution"]) == (96, 64, [96, 64])
    assert cfg["image_resolution"] == size
    table_lines = [ln for ln in res.stdout.splitlines() if ln[:1] in "┏┃┡│└"]
    assert table_lines and max(len(ln) for ln in table_lines) <= PIPE_TABLE_WIDTH
