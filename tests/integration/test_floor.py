"""The floor of ``micro`` is a floor on CPU too: the work every arm does (each owner's
H2D or its host stand-in + materialize), measured on all ranks at once like the stages;
an arm below it is called a measurement problem, never "0.8x the floor"."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kimi_bench.bench.micro_report import floor_notes
from kimi_bench.cli.main import app
from kimi_bench.cli.tables import PIPE_TABLE_WIDTH


def _arms(**medians: float) -> dict:
    return {arm: {"total_ms": {"median": m}} for arm, m in medians.items()}


def test_an_arm_below_the_floor_is_a_measurement_problem():
    floor = {"floor_ms": 4.0, "h2d_ms": 0.5, "materialize_ms": 3.5, "made_of": "what it is"}
    notes = floor_notes(floor, _arms(eager=30.0, deferred=3.2))
    assert notes[0] == "floor 4.00 ms = H2D 0.50 ms + materialize 3.50 ms: what it is"
    assert len(notes) == 2 and notes[1].startswith("MEASUREMENT PROBLEM: the deferred median")
    assert floor_notes(floor, _arms(eager=30.0, deferred=8.0))[1:] == []


@pytest.mark.slow
def test_cpu_floor_is_below_every_arm_and_says_what_it_is(tmp_path):
    out = tmp_path / "m"
    res = CliRunner().invoke(
        app,
        ["micro", "--synthetic", "2x320x240", "--ranks", "2", "--repeats", "3", "--warmup",
         "1", "--device", "cpu", "--out", str(out)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "report.json").read_text())
    floor = rep["floor"] if "floor" in rep else rep["data"]["floor"]
    assert floor["h2d_ms"] > 0 and floor["materialize_ms"] > 0
    assert floor["floor_ms"] == pytest.approx(floor["h2d_ms"] + floor["materialize_ms"])
    assert "host copy that stands in" in floor["made_of"]
    assert any(n.startswith("floor ") and "materialize" in n for n in rep["notes"])
    s = rep["summary"]
    for arm in ("eager", "deferred"):  # every arm does at least the floor's work
        assert s[f"{arm}_median_ms"] > s["floor_ms"]
    assert s["deferred_over_floor"] > 1
    assert f"= {s['deferred_over_floor']:.1f}x the floor" in res.output
    table_lines = [ln for ln in res.stdout.splitlines() if ln[:1] in "┏┃┡│└"]
    assert table_lines and max(len(ln) for ln in table_lines) <= PIPE_TABLE_WIDTH  # piped
