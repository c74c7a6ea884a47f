import json
import math
import multiprocessing as mp

import pytest
from typer.testing import CliRunner

from kimi_bench.bench.launch_runs import run_serve_on
from kimi_bench.bench.serve import ServeFailed, run_serve_ab
from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.cli.main import app
from kimi_bench.engine.launch import World
from kimi_bench.engine.serve_job import LoadJob, make_payloads
from kimi_bench.options import ServeOptions
from tests.conftest import kimibench_segments, leftover_segments
from tests.faults import DieAtRequest, HangAtRequest, spec

pytestmark = pytest.mark.slow


_segments = kimibench_segments
_leftovers = leftover_segments


def test_two_rank_cpu_end_to_end(tmp_path):
    out = tmp_path / "sab"
    res = CliRunner().invoke(
        app,
        [
            "serve-ab",
            "--rates",
            "inf,20",
            "--requests",
            "6",
            "--ranks",
            "2",
            "--resolution",
            "160x120",
            "--warmup-requests",
            "1",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "serve-ab"
    rows = {(r["rate"], r["arm"]): r for r in rep["results"]}
    assert set(rows) == {("inf", "eager"), ("inf", "deferred"), ("20", "eager"), ("20", "deferred")}
    for r in rows.values():
        assert r["completed"] == 6 and r["failed"] == 0
        assert r["ttft_median_ms"] > 0 and r["req_per_s"] > 0
    for rate in ("inf", "20"):  # the deferred arm moves fewer bytes
        assert rows[(rate, "deferred")]["bytes_moved"] < rows[(rate, "eager")]["bytes_moved"]
    assert set(rep["ab"]) == {"inf", "20"}
    med = rep["ab"]["inf"]["deferred"]["median_ttft"]
    assert isinstance(med["significant"], bool) and isinstance(med["delta_pct"], float)
    # requests served in one forward batch are one unit: at rate inf (6 requests, few
    # batches) the interval may not be called a confidence interval
    if med["a_units"] < 3 or med["b_units"] < 3:
        assert med["significant"] is False
        assert med["verdict"] == "not enough independent samples"
    assert len(rep["requests"]) == 24
    assert (out / "requests.csv").exists()
    assert (out / "ttft_cdf.png").exists() and (out / "ttft_vs_rate.png").exists()


def test_same_trace_and_payloads_for_both_arms():
    opts = ServeOptions(
        rates=(5.0,),
        requests=4,
        ranks=2,
        processor_workers=1,
        resolution=(96, 64),
        warmup_requests=0,
        device="cpu",
    )
    runs = run_serve_ab(opts)
    assert [r.arm for r in runs] == ["eager", "deferred"]
    assert runs[0].at.arrivals == runs[1].at.arrivals
    arrivals = list(runs[0].at.arrivals)
    assert len(arrivals) == 4 and arrivals == sorted(arrivals)
    rids = [sorted(r.rid for r in run.records if r.error is None) for run in runs]
    assert rids[0] == rids[1] == [0, 1, 2, 3]  # every request served by both arms
    # what the producers decode: the same bytes for both arms (and not for another seed,
    # so this check can fail); jobs as run_pipeline builds them from the options
    payloads = {arm: make_payloads(_job(opts, arm, opts.seed)) for arm in ("eager", "deferred")}
    assert payloads["eager"] == payloads["deferred"]
    assert len(payloads["eager"]) == opts.unique_images and all(payloads["eager"])
    assert make_payloads(_job(opts, "eager", opts.seed + 1)) != payloads["eager"]


def _job(opts: ServeOptions, arm: str, seed: int) -> LoadJob:
    """The load job of one arm's run, as ``bench.launch_runs`` makes it (the arm is not part
    of it: the request images are the same for every arm by construction, and checked)."""
    del arm
    return LoadJob(
        arrivals=(),
        warmup_requests=0,
        request_timeout_s=opts.request_timeout_s,
        resolution=opts.width_height,
        images_per_request=opts.images_per_request,
        image_format=opts.image_format,
        image_content=opts.image_content,
        unique_images=opts.unique_images,
        seed=seed,
        repeat_share=opts.repeat_share,
    )


def test_worker_crash_ends_the_run_cleanly():
    before = _segments()
    opts = ServeOptions(
        rates=(math.inf,),
        requests=6,
        ranks=2,
        processor_workers=1,
        resolution=(96, 64),
        warmup_requests=0,
        device="cpu",
        fault_hooks=spec(DieAtRequest, rid=3),
    )
    with pytest.raises(ServeFailed) as info:
        run_serve_on(World(), opts)  # the in-process load generator (torchrun's path)
    assert "producer0 died with exit code 3" in str(info.value)
    runs = info.value.runs
    report = build_serve_report(opts, runs, __import__("torch").device("cpu"), str(info.value))
    assert report.summary["verdict"].startswith("INCOMPLETE")
    assert report.results[0]["completed"] < 6
    assert mp.active_children() == []
    assert _leftovers(before) == []


def test_wedged_request_times_out_and_counts_as_failed():
    opts = ServeOptions(
        rates=(math.inf,),
        requests=5,
        ranks=2,
        processor_workers=2,
        resolution=(96, 64),
        warmup_requests=0,
        device="cpu",
        fault_hooks=spec(HangAtRequest, rid=2),
        request_timeout_s=3.0,
    )
    runs = run_serve_on(World(), opts)  # a timeout is a result, not a crash: both arms run
    assert [r.arm for r in runs] == ["eager", "deferred"]
    for run in runs:
        assert run.error is not None and "1 request(s) timed out" in run.error
        assert sorted(r.rid for r in run.records) == [0, 1, 3, 4]
    report = build_serve_report(opts, runs, __import__("torch").device("cpu"), None)
    assert report.summary["failed_requests"] == 2  # one per arm
    assert all(row["failed"] == 1 and row["completed"] == 4 for row in report.results)
    assert mp.active_children() == []
