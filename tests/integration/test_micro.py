import json
import multiprocessing as mp

import pytest
from typer.testing import CliRunner

from kimi_bench.bench.micro import MicroFailed, run_micro
from kimi_bench.cli.main import app
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.navit import plan_resize
from kimi_bench.engine.images import describe_spec
from kimi_bench.options import MicroOptions, parse_image_spec
from kimi_bench.pipeline import STAGES
from kimi_bench.pipeline.transport import list_segments
from tests.conftest import kimibench_segments, leftover_segments
from tests.faults import CrashAtRepeat, spec

K3 = get_preset("kimi-k3")


_segments = kimibench_segments
_leftovers = leftover_segments


def test_spec_parser():
    assert parse_image_spec("4x1536x1024") == ((4, 1536, 1024),)
    assert parse_image_spec("2x1536x1024, 1x4096x3072") == ((2, 1536, 1024), (1, 4096, 3072))
    assert describe_spec(((2, 640, 480),)) == "2 images of width 640 and height 480"
    for bad in ("4x0x10", "x", "-1x2x3", "4x1536", "0x2x2", ""):
        with pytest.raises(ValueError, match="bad image spec"):
            parse_image_spec(bad)


@pytest.mark.parametrize("spec", ["4x0x10", "x", "-1x2x3"])
def test_bad_spec_exits_2(spec, tmp_path):
    res = CliRunner().invoke(app, ["micro", "--images", spec, "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "COUNTxWIDTHxHEIGHT" in res.output or "must be >= 1" in res.output


@pytest.mark.slow
def test_stage_bookkeeping_decisions_and_bytes_cpu_two_ranks():
    report = run_micro(
        MicroOptions(
            synthetic="2x64x48,1x30x20",
            ranks=2,
            repeats=2,
            warmup=1,
            device="cpu",
            transport="shm",
            launches=1,
        )
    )
    eager, deferred = report.data["arms"]["eager"], report.data["arms"]["deferred"]
    plans = [plan_resize(64, 48, K3)] * 2 + [plan_resize(30, 20, K3)]
    fp32 = sum(3 * p.padded_width * p.padded_height * 4 for p in plans)
    raw = 2 * 3 * 64 * 48 + 3 * 30 * 20
    # every byte count comes from the ledger: the eager producer's D2H moves the FP32
    # patches once; shm copy-in moves what each arm carries
    assert eager["stages"]["d2h"]["bytes"] == fp32
    assert deferred["stages"]["d2h"]["bytes"] == 0
    shm_in = {
        a: sum(c["bytes"] for c in arm["copies"] if c["op"] == "shm_copy_in")
        for a, arm in (("eager", eager), ("deferred", deferred))
    }
    assert shm_in == {"eager": fp32, "deferred": raw}
    assert eager["stages"]["pre_embed_move"]["bytes"] == 2 * fp32  # every rank, every item
    assert deferred["stages"]["pre_embed_move"]["bytes"] == 0  # whitelisted: skipped
    assert deferred["stages"]["owner_h2d"]["bytes"] == raw  # owners only
    for arm in (eager, deferred):
        totals = arm["total_ms"]["samples"]
        assert len(totals) == 2
        for i, total in enumerate(totals):
            parts = sum(st["samples_ms"][i] for st in arm["stages"].values())
            assert parts == pytest.approx(total, rel=1e-6)
    decisions = report.summary["decisions"]
    assert [d["defer"] for d in decisions] == [True, True, True]
    assert all("<=" in d["reason"] for d in decisions)
    assert report.summary["bit_exact_all_repeats"] is True
    assert report.summary["bytes_ratio"] >= 2
    assert len(report.data["speedup"]["samples"]) == 2
    assert report.summary["floor_ms"] > 0
    assert set(eager["stages"]) == set(STAGES)
    assert list_segments(report.data["shm_prefix"]) == []
    assert mp.active_children() == []


@pytest.mark.slow
def test_rank_failure_cleans_up_and_keeps_partial_results():
    before = _segments()
    with pytest.raises(MicroFailed) as info:
        run_micro(
            MicroOptions(
                synthetic="2x64x48",
                ranks=2,
                repeats=3,
                warmup=0,
                device="cpu",
                fault_hooks=spec(CrashAtRepeat, repeat=1, rank=1),
                timeout_s=60,
            )
        )
    report = info.value.report
    assert "injected fault" in str(info.value)
    assert report.summary["error"] and report.summary["verdict"].startswith("INCOMPLETE")
    assert report.summary["repeats_completed"] == 1  # repeat 0 finished before the fault
    assert _leftovers(before) == []
    assert mp.active_children() == []


@pytest.mark.slow
def test_cli_micro_cpu(tmp_path):
    out = tmp_path / "m"
    res = CliRunner().invoke(
        app,
        [
            "micro",
            "--images",
            "2x640x480",
            "--ranks",
            "2",
            "--repeats",
            "3",
            "--out",
            str(out),
            "--device",
            "cpu",
        ],
    )
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "micro" and rep["schema_version"] == 2
    assert rep["summary"]["eager_moved_bytes"] >= 3 * rep["summary"]["deferred_moved_bytes"]
    assert (out / "stages.csv").exists() and (out / "report.md").exists()
