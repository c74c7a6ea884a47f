"""The projection's host-copy probe and its control-plane rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.project import Host, Scale, Topology, load_probe
from kimi_bench.project.build import build_projection
from kimi_bench.project.model import fit, predict_arm
from kimi_bench.project.probe import parse_probe
from tests.unit.test_project import MB, cal_of, shm_report

PROBE = {
    "cores": 16,
    "ops": {
        "shm_copy_in": {str(100 * MB): {"alone": {"2": 10.0, "8": 30.0},
                                        "together": {"2": 11.0, "8": 40.0}}},
        "clone": {str(100 * MB): {"alone": {"2": 4.0, "8": 9.0},
                                  "together": {"2": 5.0, "8": 25.0}}},
    },
}  # fmt: skip


def test_a_threaded_stage_changes_by_what_the_probe_measured_for_its_bytes() -> None:
    cal = cal_of(shm_report())
    host = Host(cores=16, probe=parse_probe(PROBE, "test"))
    pred = predict_arm(cal.arm("eager"), cal, Topology(8, 8, 1), host, fit(cal, host))
    # serialize: the producer copies 100 MB into shm alone: +20 ms (10 -> 30)
    assert pred.stages["serialize"].ms == pytest.approx(20.0 + 20.0)
    # take_copy: every rank clones its 100 MB at once (the ledger sums 2 ranks): +20 ms
    assert pred.stages["take_copy"].ms == pytest.approx(20.0 + 20.0)
    # deferred moves a quarter of the bytes: a quarter of the change
    d = predict_arm(cal.arm("deferred"), cal, Topology(8, 8, 1), host, fit(cal, host))
    assert d.stages["serialize"].ms == pytest.approx(5.0 + 20.0 / 4)


def test_a_probe_of_another_host_falls_back_to_the_exponent() -> None:
    cal = cal_of(shm_report())
    probe = parse_probe(PROBE, "test")
    host = Host(cores=32, thread_exponent=1.0, probe=probe)  # the probe ran on 16 cores
    pred = predict_arm(cal.arm("eager"), cal, Topology(8, 8, 1), host, fit(cal, host))
    assert pred.stages["serialize"].ms == pytest.approx(20.0 * (32 // 3) / (32 // 9))
    assert not probe.covers(16, 2, 4)  # no 4-rank column: not covered either
    partial = dict(PROBE, ops={"clone": {str(100 * MB): {"alone": {"2": 4.0, "8": 9.0},
                                                       "together": {"2": 5.0}}}})  # fmt: skip
    assert not parse_probe(partial, "test").covers(16, 2, 8)  # one side lacks 8 ranks


def test_packaged_probe_and_bad_files(tmp_path: Path) -> None:
    packaged = load_probe(None)
    assert packaged.cores == 16 and packaged.covers(16, 2, 4, 8)
    bad = tmp_path / "probe.json"
    bad.write_text(json.dumps({"cores": 16, "ops": {"clone": {"5": {"alone": {}}}}}))
    with pytest.raises(ValueError, match="not a host-copy probe"):
        load_probe(bad)
    res = CliRunner().invoke(app, ["project", str(tmp_path), "--host-probe", str(bad)])
    assert res.exit_code == 2 and "Traceback" not in res.output


def _with_control(raw: dict[str, Any], ms: float) -> dict[str, Any]:
    rounds = [{"total_ms": ms, "stage_ms": {"broadcast": 2.0, "gather": 1.0}}] * 3
    return raw | {"control_repeats": {"eager": rounds, "deferred": rounds}}


def test_control_plane_rows_payload_cost_and_their_own_validation_note() -> None:
    cal = cal_of(_with_control(shm_report(), 6.0))
    measured = cal_of(_with_control(shm_report(ranks=4), 9.0), "r4")
    rep = build_projection([cal], Host(cores=16), Scale(ranks=(4,)), [measured])
    arms = {r["arm"] for r in rep.results}
    assert {"eager:control", "deferred:control"} <= arms
    row = next(t for t in rep.data["totals"] if t["ranks"] == 2)
    assert row["eager:control_ms"] == pytest.approx(6.0)  # at its own rank count: measured
    e, d = row["eager_ms"] - 6.0, row["deferred_ms"] - 6.0
    assert (row["eager_payload_ms"], row["deferred_payload_ms"]) == pytest.approx((e, d))
    assert row["payload_speedup"] == pytest.approx(e / d)
    # the arms' target counts arms only; the control plane gets a note of its own
    assert {t["arm"] for t in rep.data["validation"]["totals"]} == {"eager", "deferred"}
    assert any(n.startswith("control plane") and "vs 9.0 ms" in n for n in rep.notes)


def test_a_stage_the_validation_missed_widens_every_projected_total_of_its_arm() -> None:
    cal = cal_of(shm_report())
    measured_raw = shm_report(ranks=4)
    # at 4 ranks the deferred producer took 2x what the model keeps fixed (8 -> 16 ms)
    measured_raw["arms"]["deferred"]["stages"]["producer"]["summary_ms"]["median"] = 16.0
    measured_raw["arms"]["deferred"]["stages"]["producer"]["samples_ms"] = [16.0]
    rep = build_projection([cal], Host(cores=16), Scale(ranks=(8,)), [cal_of(measured_raw)])
    total = next(
        r for r in rep.results
        if r["arm"] == "deferred" and r["ranks"] == 8 and r["stage"] == "TOTAL"
    )  # fmt: skip
    producer = next(
        r for r in rep.results
        if r["arm"] == "deferred" and r["ranks"] == 8 and r["stage"] == "producer"
    )  # fmt: skip
    width = total["high_ms"] - total["predicted_ms"]
    assert width >= producer["predicted_ms"] * 0.5  # the producer's -50% error, at least
    assert total["low_ms"] == pytest.approx(total["predicted_ms"] - width)
    row = next(t for t in rep.data["totals"] if t["ranks"] == 8)
    assert "deferred_interval_ms" in row
    assert any(n.startswith("intervals:") for n in rep.notes)
