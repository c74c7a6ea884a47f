"""kimi_bench.project: model arithmetic on synthetic micro reports (expected values worked
out by hand in the comments), the error table, the report files and the CLI's exit codes."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.project import (
    Calibration,
    Host,
    ProjectionError,
    Scale,
    Topology,
    read_calibration,
)
from kimi_bench.project.build import build_projection, emit_projection
from kimi_bench.project.calibration import stage_view
from kimi_bench.project.model import fit, predict_arm, stage_kind, tree_ms, tree_rounds
from kimi_bench.project.projection import curve_points, project
from kimi_bench.project.validate import biggest_misses, total_errors, validate
from kimi_bench.report.kinds import StageBlock
from kimi_bench.report.model import Report

MB = 1_000_000


def _stage(ms: float | None, nbytes: int) -> dict[str, Any]:
    if ms is None:
        return {"applicable": False, "bytes": nbytes, "samples_ms": []}
    return {"applicable": True, "bytes": nbytes, "samples_ms": [ms], "summary_ms": {"median": ms}}


def micro_dict(
    ranks: int,
    transport: str,
    arms: dict[str, dict[str, tuple[float | None, int]]],
    totals: dict[str, float],
    gpus: int = 1,
    cores: int | None = 16,
    h2d_gbps: float | None = 10.0,
    groups: list[list[int]] | None = None,
) -> dict[str, Any]:
    """A micro report.json as the older micro wrote it (arms at the top level)."""
    env: dict[str, Any] = {"device": "cuda" if gpus else "cpu", "gpu_count": gpus}
    if cores is not None:
        env["cpu_count"] = cores
    return {
        "schema_version": 1,
        "kind": "micro",
        "environment": env,
        "config": {"ranks": ranks, "transport": transport, "groups": groups or [[4, 100, 100]]},
        "summary": {},
        "notes": [],
        "results": [],
        "arms": {
            arm: {
                "stages": {s: _stage(ms, b) for s, (ms, b) in stages.items()},
                "total_ms": {"median": totals[arm]},
                "unattributed_ms": [0.0],
            }
            for arm, stages in arms.items()
        },
        "floor": {"pinned_h2d_gbps": h2d_gbps},
    }


def shm_report(ranks: int = 2, scale_ms: float = 1.0) -> dict[str, Any]:
    """2 ranks, one GPU, 16 cores: micro gave every process 16 // 3 = 5 threads."""
    s = scale_ms
    return micro_dict(
        ranks,
        "shm",
        {
            "eager": {
                "producer": (10.0 * s, 100 * MB),
                "serialize": (20.0 * s, 100 * MB),
                "broadcast": (2.0 * s, 1000 * (ranks - 1)),
                "take_copy": (20.0 * s, 100 * MB * ranks),
                "pre_embed_move": (30.0 * s, 100 * MB * ranks),
                "owner_h2d": (None, 0),
                "owner_materialize": (1.0 * s, 0),
            },
            "deferred": {
                "producer": (8.0 * s, 40 * MB),
                "serialize": (5.0 * s, 25 * MB),
                "broadcast": (2.0 * s, 1000 * (ranks - 1)),
                "take_copy": (8.0 * s, 25 * MB * ranks),
                "pre_embed_move": (None, 0),
                "owner_h2d": (6.0 * s, 40 * MB),
                "owner_materialize": (2.0 * s, 0),
            },
        },
        {"eager": 83.0 * s, "deferred": 31.0 * s},
    )


def pickle_report(ranks: int = 2) -> dict[str, Any]:
    return micro_dict(
        ranks,
        "pickle",
        {
            "eager": {
                "serialize": (100.0, 100 * MB),
                "to_rank0": (150.0, 100 * MB),
                "broadcast": (300.0, 100 * MB * (ranks - 1)),
            },
            "deferred": {
                "serialize": (10.0, 25 * MB),
                "to_rank0": (20.0, 25 * MB),
                "broadcast": (50.0, 25 * MB * (ranks - 1)),
            },
        },
        {"eager": 550.0, "deferred": 80.0},
    )


def cal_of(raw: dict[str, Any], source: str = "synthetic") -> Calibration:
    return read_calibration(Report.from_dict(raw), source)


# ---------------------------------------------------------------- reading reports


def test_stage_view_reads_medians_samples_and_not_applicable() -> None:
    def view(stage: dict[str, Any]) -> tuple[float | None, int]:
        return stage_view(StageBlock.model_validate(stage))

    assert view({"bytes": 5, "summary_ms": {"median": 2.5}}) == (2.5, 5)
    assert view({"bytes": 0, "samples_ms": [1.0, 9.0, 3.0]}) == (3.0, 0)
    assert view({"applicable": False, "bytes": 0, "samples_ms": []}) == (None, 0)


def test_calibration_reads_the_older_format() -> None:
    cal = cal_of(shm_report())
    assert (cal.ranks, cal.transport, cal.gpus, cal.cores, cal.h2d_gbps) == (2, "shm", 1, 16, 10.0)
    assert cal.nodes == 1
    assert cal.image_areas == (10_000,) * 4
    take = cal.arm("eager").stages["take_copy"]
    assert take.ops == {"clone": (200 * MB, 1)}
    assert cal.arm("eager").stages["owner_h2d"].ms is None
    assert stage_kind(take) == "threaded"
    assert stage_kind(cal.arm("eager").stages["serialize"]) == "threaded"  # shm copy-in
    assert stage_kind(cal.arm("eager").stages["broadcast"]) == "tree"
    assert stage_kind(cal.arm("eager").stages["producer"]) == "fixed"


def test_nodes_of_a_multi_node_run_set_the_validation_topology() -> None:
    from kimi_bench.project.validate import same_host_topology

    raw = pickle_report(4)
    raw["config"]["nnodes"] = 2
    cal = cal_of(raw)
    assert cal.nodes == 2
    topo = same_host_topology(cal, cal.ranks, cal.nodes)
    assert (topo.ranks_per_node, topo.nodes) == (2, 2)


def test_calibration_uses_the_copy_ledger_when_present() -> None:
    raw = shm_report()
    raw["arms"]["deferred"]["copies"] = [
        {"stage": "take_copy", "op": "map", "bytes": 50 * MB, "count": 8, "copies": False},
        {"stage": "broadcast", "op": "gloo_broadcast", "bytes": 3000, "count": 1},
        {"stage": "broadcast", "op": "pickle", "bytes": 3000, "count": 1},
    ]
    cal = cal_of(raw)
    assert cal.ledger
    take = cal.arm("deferred").stages["take_copy"]
    assert take.ops == {"map": (0, 8)}  # a copy-on-write map moves no byte
    assert stage_kind(take) == "fixed"  # so it does not scale with threads
    # the arm without a ledger keeps the inferred operations
    assert cal.arm("eager").stages["take_copy"].ops == {"clone": (200 * MB, 1)}


def test_not_a_micro_report_is_refused() -> None:
    raw = shm_report()
    raw["kind"] = "parity"
    with pytest.raises(ProjectionError, match="'parity' report"):
        cal_of(raw)
    raw = shm_report()
    del raw["arms"]
    with pytest.raises(ProjectionError, match="no per-arm stage data"):
        cal_of(raw)


def test_recorded_carrier_traits_are_read_and_a_broken_block_is_named() -> None:
    raw = shm_report()
    raw["config"]["carrier_traits"] = {
        "name": "pickle", "uses_segments": False, "spans_nodes": True, "serialize_op": "pickle",
    }  # fmt: skip
    cal = cal_of(raw)
    assert (cal.uses_segments, cal.serialize_op) == (False, "pickle")
    raw["config"]["carrier_traits"] = {"uses_segments": "perhaps"}
    with pytest.raises(ProjectionError, match=r"synthetic: config\.carrier_traits does not read"):
        cal_of(raw)


# ---------------------------------------------------------------- model arithmetic


def test_gloo_binomial_tree_rounds() -> None:
    assert tree_rounds(1) == []
    assert tree_rounds(2) == [[(0, 1)]]
    assert tree_rounds(5) == [[(0, 1)], [(0, 2), (1, 3)], [(0, 4)]]
    assert tree_rounds(8)[2] == [(0, 4), (1, 5), (2, 6), (3, 7)]


def test_tree_time_one_node_and_two_nodes() -> None:
    host = Host(loopback_streams=2.0, link_gbps=8.0)
    # 1 GB at 1 GB/s: one transfer = 1000 ms. One node, 8 ranks: rounds of 1, 2, 4
    # transfers -> 1000 * (1 + max(1, 2/2) + max(1, 4/2)) = 4000 ms.
    assert tree_ms(Topology(8, 8, 1), 1000 * MB, host, 1.0) == pytest.approx(4000.0)
    assert tree_ms(Topology(2, 2, 1), 1000 * MB, host, 1.0) == pytest.approx(1000.0)
    # Two nodes of 4: rounds 0 and 1 on node 0 (1000 + 1000); round 2 sends 4 GB from
    # node 0 to node 1: host load 4 * 0.5 = 2 streams -> 1000 ms, NIC 4e9 B * 8 / 8e9 b/s
    # = 4000 ms; the round takes the larger: 6000 ms in all.
    assert tree_ms(Topology(8, 4, 4), 1000 * MB, host, 1.0) == pytest.approx(6000.0)


def test_threads_follow_micros_split() -> None:
    assert Topology(2, 2, 1).threads(16) == 5  # 16 // (2 + 1)
    assert Topology(8, 8, 1).threads(16) == 1  # 16 // 9
    assert Topology(64, 8, 8).threads(32) == 3  # node 0: producer + 8 ranks
    assert Topology(8, 8, 1).threads(None) is None
    assert Topology(64, 8, 8).nodes == 8


def test_threaded_copy_scales_with_threads_above_its_fixed_latency() -> None:
    cal = cal_of(shm_report())
    fitted = fit(cal, Host(cores=16, thread_exponent=1.0))
    # take_copy: 20 ms at 200 MB (eager), 8 ms at 50 MB (deferred): slope 12/150 ms per
    # MB, intercept 8 - 50 * 12/150 = 4 ms of fixed latency.
    assert fitted.intercepts_ms["take_copy"] == pytest.approx(4.0)
    topo = Topology(8, 8, 1)  # 1 thread per process instead of 5
    eager = predict_arm(cal.arm("eager"), cal, topo, Host(cores=16, thread_exponent=1.0), fitted)
    assert eager.stages["take_copy"].ms == pytest.approx(4.0 + 16.0 * 5)
    half = Host(cores=16, thread_exponent=0.5)
    deferred = predict_arm(cal.arm("deferred"), cal, topo, half, fit(cal, half))
    assert deferred.stages["take_copy"].ms == pytest.approx(4.0 + 4.0 * math.sqrt(5))
    # serialize: intercept of (100 MB, 20 ms), (25 MB, 5 ms) is 0: all of it scales
    assert eager.stages["serialize"].ms == pytest.approx(20.0 * 5)
    # fixed stages stay
    assert eager.stages["producer"].ms == 10.0
    assert eager.stages["owner_materialize"].ms == 1.0


def test_h2d_per_rank_rate_plus_shared_link() -> None:
    cal = cal_of(shm_report())
    host = Host(cores=16)
    fitted = fit(cal, host)
    # pre_embed_move at 2 ranks on 1 GPU: 100 MB per rank, 200 MB over the link at
    # 10 GB/s = 20 ms; the other 10 ms are the rank's pageable copy of 100 MB.
    assert fitted.pageable_gbps["eager/pre_embed_move"] == pytest.approx(10.0)
    shared = predict_arm(cal.arm("eager"), cal, Topology(8, 8, 1), host, fitted)
    assert shared.stages["pre_embed_move"].ms == pytest.approx(10.0 + 80.0)  # 800 MB on 1 link
    own = predict_arm(cal.arm("eager"), cal, Topology(8, 8, 8), host, fitted)
    assert own.stages["pre_embed_move"].ms == pytest.approx(10.0 + 10.0)
    # owner_h2d: 4 equal images (40 MB) over 2 owners: 20 MB each, 40 MB over the link
    # (4 ms); 2 ms for 20 MB pageable. At 4 ranks each owner has one image (10 MB -> 1 ms)
    # and the shared link still carries 40 MB (4 ms); on 4 GPUs each link 10 MB (1 ms).
    d = cal.arm("deferred")
    assert predict_arm(d, cal, Topology(4, 4, 1), host, fitted).stages[
        "owner_h2d"
    ].ms == pytest.approx(5.0)
    assert predict_arm(d, cal, Topology(4, 4, 4), host, fitted).stages[
        "owner_h2d"
    ].ms == pytest.approx(2.0)


def test_total_is_the_measured_total_plus_the_stage_changes() -> None:
    cal = cal_of(shm_report())
    host = Host(cores=16, thread_exponent=1.0)
    fitted = fit(cal, host)
    same = predict_arm(cal.arm("eager"), cal, Topology(2, 2, 1), host, fitted)
    assert same.total_ms == pytest.approx(83.0)  # the calibration predicts itself
    p = predict_arm(cal.arm("eager"), cal, Topology(8, 8, 1), host, fitted)
    change = sum(
        s.ms - s.measured_ms
        for s in p.stages.values()
        if s.ms is not None and s.measured_ms is not None
    )
    assert p.total_ms == pytest.approx(83.0 + change)


def test_loopback_rate_from_the_pickle_broadcast() -> None:
    cal = cal_of(pickle_report())
    fitted = fit(cal, Host())
    # transfer = broadcast - serialize - to_rank0: 50 ms at 100 MB, 20 ms at 25 MB:
    # 30 ms per 75 MB = 0.4 ms/MB = 2.5 GB/s.
    assert fitted.loopback_gbps == pytest.approx(2.5)
    assert fitted.loopback_source.startswith("calibration")
    # shm: the payload is metadata, the default single-transfer rate is used
    assert fit(cal_of(shm_report()), Host()).loopback_source.startswith("default")
    # 4 ranks, one node, 2 streams: extra round of 2 transfers at max(1, 2/2) = 1 x
    # 40 ms (100 MB at 2.5 GB/s): broadcast 300 + 40 ms.
    host = Host(loopback_streams=2.0)
    p = predict_arm(cal.arm("eager"), cal, Topology(4, 4, 1), host, fit(cal, host))
    assert p.stages["broadcast"].ms == pytest.approx(340.0)


# ---------------------------------------------------------------- projection and errors


def test_curve_points_and_shm_stays_on_one_node() -> None:
    assert curve_points(2, (16, 32, 64)) == [2, 4, 8, 16, 32, 64]
    assert curve_points(2, (12,)) == [2, 4, 8, 12]
    proj = project(cal_of(shm_report()), Host(cores=16), Scale((16,), 8, (100.0,)))
    assert {r.ranks for r in proj.rows} == {2, 4, 8}
    assert any("16 ranks (2 nodes)" in s for s in proj.skipped)
    pk = project(cal_of(pickle_report()), Host(cores=16), Scale((16,), 8, (100.0, 400.0)))
    assert {r.link_gbps for r in pk.rows if r.ranks == 16} == {100.0, 400.0}
    assert {r.link_gbps for r in pk.rows if r.ranks == 8} == {None}


def test_error_table_against_measured_reports() -> None:
    cal = cal_of(shm_report())
    host = Host(cores=16, thread_exponent=1.0)
    measured_raw = shm_report(ranks=2, scale_ms=1.1)  # every stage 10% slower
    rows = validate(cal, fit(cal, host), host, [cal_of(measured_raw, "m")])
    producer = next(r for r in rows if r.arm == "eager" and r.stage == "producer")
    assert producer.predicted_ms == 10.0
    assert producer.measured_ms == pytest.approx(11.0)
    assert producer.error_ms == pytest.approx(-1.0)
    assert producer.error_pct == pytest.approx(-100 / 11)
    assert producer.share_of_total == pytest.approx(11.0 / 91.3)
    tot = total_errors(rows)
    assert [(t.arm, t.within_target) for t in tot] == [("eager", True), ("deferred", True)]
    assert tot[0].error_pct == pytest.approx(100 * (83.0 / 91.3 - 1))
    worst = biggest_misses(rows, "shm", 2, "eager", n=2)
    assert [r.stage for r in worst] == ["pre_embed_move", "serialize"]  # -3.0, -2.0 ms
    small = next(r for r in rows if r.arm == "eager" and r.stage == "owner_materialize")
    assert (small.note or "").startswith("small")  # 1.1 ms of 91.3 ms
    assert producer.note is None


def test_validation_refuses_another_input_or_carrier() -> None:
    cal = cal_of(shm_report())
    other = shm_report(ranks=4)
    other["config"]["groups"] = [[2, 50, 50]]
    with pytest.raises(ProjectionError, match="different input"):
        validate(cal, fit(cal, Host()), Host(), [cal_of(other, "o")])
    with pytest.raises(ProjectionError, match="carrier"):
        validate(cal, fit(cal, Host()), Host(), [cal_of(pickle_report(4), "p")])


def test_report_files_and_figure(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    cals = [cal_of(shm_report(), "r2-shm"), cal_of(pickle_report(), "r2-pickle")]
    measured = [cal_of(shm_report(ranks=4, scale_ms=1.05), "r4-shm")]
    report = build_projection(cals, Host(), Scale((16,), 8, (100.0,)), measured)
    files = emit_projection(report, tmp_path)
    names = sorted(p.name for p in files)
    assert names == [
        "projection.csv",
        "projection.png",
        "report.html",
        "report.json",
        "report.md",
        "validation.csv",
    ]
    assert (tmp_path / "projection.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "report.html").read_text()  # like every kind: the figure embedded
    assert '<img alt="Projection" src="data:image/png;base64,' in page
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["kind"] == "project"
    assert saved["config"]["host"]["cores"] == 16  # taken from the calibration
    assert saved["summary"]["validation_cases"] == 2
    assert any(n.startswith("model:") for n in saved["notes"])
    md = (tmp_path / "report.md").read_text()
    assert "Validation: error per stage" in md and "binomial tree" in md


# ---------------------------------------------------------------- CLI


def _write(tmp_path: Path, name: str, raw: dict[str, Any]) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "report.json").write_text(json.dumps(raw))
    return d


def test_cli_projects_and_validates(tmp_path: Path) -> None:
    r2 = _write(tmp_path, "r2", shm_report())
    r4 = _write(tmp_path, "r4", shm_report(ranks=4))
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["project", str(r2), "--ranks", "4,8", "--validate", str(r4), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert (out / "report.json").is_file() and (out / "validation.csv").is_file()
    assert "validation" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["project", "{tmp}/nowhere"], "report not found"),
        (["project", "{tmp}/parity"], "'parity' report"),
        (["project", "{tmp}/garbage"], "not a JSON report"),
        (["project", "{tmp}/r2", "--ranks", "a,b"], "comma-separated numbers"),
        (["project", "{tmp}/r2", "--link-gbps", "0"], "--link-gbps: 0.0 is out of range (> 0"),
        (["project", "{tmp}/r2", "{tmp}/r2"], "one calibration report per carrier"),
        (["project", "{tmp}/r2", "--validate", "{tmp}/pk4"], "carrier"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    _write(tmp_path, "r2", shm_report())
    _write(tmp_path, "pk4", pickle_report(4))
    parity = shm_report()
    parity["kind"] = "parity"
    _write(tmp_path, "parity", parity)
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "report.json").write_text("{not json")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())
    assert "Traceback" not in res.output
    assert not (tmp_path / "out").exists()


SHM_R2 = Path(__file__).resolve().parents[2] / "reports/baselines/h200/micro/sglang-0.5.23/r2-shm"


def test_shm_only_calibration_says_why_on_the_console_and_shows_only_asked_ranks(
    tmp_path: Path,
) -> None:
    res = CliRunner().invoke(
        app, ["project", str(SHM_R2), "--ranks", "16,32,64", "--gpus-per-node", "8",
              "--out", str(tmp_path / "p")],
    )  # fmt: skip
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "no projection at 16, 32, 64 ranks" in flat
    assert "shared memory (the shm calibration) does not cross nodes" in flat
    assert "kimi-bench project r2-shm/report.json r2-pickle/report.json" in flat
    assert "predicted totals" not in flat  # no table of rank counts that were not asked
    assert "not projected: shm at 16 ranks (2 nodes)" in flat
    rep = json.loads((tmp_path / "p" / "report.json").read_text())
    assert rep["summary"]["verdict"].startswith("no projection at 16, 32, 64 ranks")


def test_console_table_holds_only_the_asked_rank_counts(tmp_path: Path) -> None:
    pickle = SHM_R2.parent / "r2-pickle"
    res = CliRunner().invoke(
        app, ["project", str(SHM_R2), str(pickle), "--ranks", "4,16", "--gpus-per-node", "8",
              "--out", str(tmp_path / "p")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    table = [line for line in res.output.splitlines() if line.startswith("│")]
    ranks = {int(cells[2].strip()) for cells in (line.split("│") for line in table)}
    assert ranks == {4, 16}
    flat = " ".join(res.output.split())
    assert "not projected: shm at 16 ranks" in flat
    # each carrier's speedup at the largest asked rank count it was projected to
    assert re.search(
        r"projected speedup pickle @ 100 Gb/s: [\d.]+x at 16 ranks; shm: [\d.]+x at 4 ranks", flat
    )
