"""The control plane of ``micro``: every arm also runs on a minimal payload, interleaved
with the repeats; each arm's payload cost (arm minus control) comes with an interval, the
verdict names payload-cost speedups, and stages whose cost exists only in the emulation
(the metadata gather when ranks share a device) are named apart. Structure only: no
assertion depends on how fast this machine is."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from kimi_bench.bench.micro_control import emulation_stages
from kimi_bench.ci.evidence import EvidenceError, micro_evidence
from kimi_bench.cli.main import app
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.runtime import DEFAULT_RUNTIME
from kimi_bench.engine.micro_job import MicroJob, control_images, rounds
from kimi_bench.infra.fault_hooks import NO_FAULTS
from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.difference import difference, ratio_of_differences
from kimi_bench.options import MicroOptions
from kimi_bench.report.model import Report
from kimi_bench.schemas import validate_report

ARMS = ("eager", "deferred", "zero-copy")


def _job(repeats: int, warmup: int, control: int, profile: int = 0) -> MicroJob:
    return MicroJob(
        cfg=get_preset("kimi-k3"), groups=((3, 64, 48),), content="random", seed=0, ranks=2,
        transport="shm", device="cpu", repeats=repeats, warmup=warmup, prefix="", init_file="",
        arms=ARMS, control_repeats=control, runtime=DEFAULT_RUNTIME, repeat_share=0.0,
        image_paths=(),
        ranks_per_node=0, hooks=NO_FAULTS, decoder="auto", baseline_whitelisted=False,
        profile_dir="traces" if profile else None, profile_repeats=profile, launch=0,
    )  # fmt: skip


def test_control_rounds_are_spread_over_the_repeats():
    order = rounds(_job(repeats=6, warmup=2, control=3))
    control = [i for i, (_, c) in enumerate(order) if c]
    measured = [it for it, c in order if not c]
    assert measured == list(range(8))  # warm-up and measured iterations, in order
    assert [order[i][0] for i in control] == [0, 1, 2, 3]  # 1 unmeasured + 3
    assert control[0] == 0  # the unmeasured control round comes first
    # each measured control round sits before a different third of the measured repeats
    before = [order[i + 1][0] for i in control[1:]]
    assert before == [3, 5, 7]
    assert rounds(_job(repeats=4, warmup=0, control=0)) == [(i, False) for i in range(4)]
    assert sum(c for _, c in rounds(_job(repeats=2, warmup=0, control=5))) == 5


def test_profiled_rounds_come_after_the_measured_ones_and_are_not_measured():
    job = _job(repeats=3, warmup=1, control=1, profile=2)
    order = rounds(job)
    assert order[-2:] == [(4, False), (5, False)]  # after warm-up 0 and measured 1..3
    assert [job.profiled(it, c) for it, c in order] == [False] * (len(order) - 2) + [True] * 2


def test_control_payload_is_one_merged_token_per_image():
    images = control_images(_job(2, 0, 1))
    assert [im.size for im in images] == [(28, 28)] * 3


def test_control_repeats_option_bounds():
    assert MicroOptions().control_repeats == 3
    assert MicroOptions(control_repeats=0).control_repeats == 0
    with pytest.raises(ValueError):
        MicroOptions(control_repeats=-1)


def test_difference_has_an_interval_over_both_sides():
    d = difference(Measurement([10.0, 11.0, 12.0, 13.0]), Measurement([2.0, 3.0, 4.0]))
    assert d.value == pytest.approx(11.5 - 3.0)
    assert d.interval.is_ci and d.interval.low <= d.value <= d.interval.high
    few = difference(Measurement([10.0, 12.0]), Measurement([3.0]))
    assert few.interval.kind == "range" and (few.interval.low, few.interval.high) == (7.0, 9.0)


def test_ratio_of_differences_pairs_the_arms_and_refuses_a_zero_payload():
    eager = Measurement([50.0, 52.0, 49.0, 51.0, 50.0], unit_ids=[0, 1, 2, 3, 4])
    deferred = Measurement([20.0, 21.0, 19.0, 20.5, 20.0], unit_ids=[0, 1, 2, 3, 4])
    ctl_e, ctl_d = Measurement([10.0, 10.5, 9.5]), Measurement([10.0, 11.0, 9.0])
    value, iv = ratio_of_differences(eager, ctl_e, deferred, ctl_d)
    assert value == pytest.approx((50.0 - 10.0) / (20.0 - 10.0))
    assert iv.is_ci and iv.low <= value <= iv.high
    nothing = Measurement([10.0, 10.2, 9.9, 10.1, 10.0], unit_ids=[0, 1, 2, 3, 4])
    value, iv = ratio_of_differences(eager, ctl_e, nothing, ctl_d)
    assert math.isnan(value) or iv.kind == "none"  # a payload within the control's noise


def test_metadata_gather_is_emulation_only_and_stand_ins_are_named():
    rec = {"copies": [
        {"stage": "gather", "op": "gather_metadata", "mirrors": "encoder gather: metadata"},
        {"stage": "owner_h2d", "op": "h2d", "mirrors": "x [no CUDA: host copy stands in]"},
        {"stage": "serialize", "op": "shm_copy_in", "mirrors": "ShmPointerMMData"},
    ]}  # fmt: skip
    found = emulation_stages({"eager": [rec], "deferred": [rec]})
    assert [(e["stage"], e["kind"]) for e in found] == [
        ("owner_h2d", "stand_in"),
        ("gather", "emulation_only"),
    ]
    assert found[1]["arms"] == ["eager", "deferred"] and "NCCL" in found[1]["why"]


# the module's tests share its fixture's run: one worker runs them all, the run once
pytestmark = pytest.mark.xdist_group("micro_control")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("control") / "m"
    res = CliRunner().invoke(
        app,
        ["micro", "--synthetic", "2x96x64", "--ranks", "2", "--repeats", "3", "--warmup", "1",
         "--control-repeats", "3", "--launches", "1", "--arms", ",".join(ARMS), "--device", "cpu",
         "--out", str(out)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return out, json.loads((out / "report.json").read_text()), res.output


@pytest.mark.slow
def test_cpu_micro_reports_control_stages_and_payload_cost(run):
    _, rep, _ = run
    validate_report(rep)
    ctl = rep["control"]
    assert ctl["rounds"] == 3 and ctl["payload_images"].startswith("2 image(s) of 28x28")
    for arm in ARMS:
        assert len(rep["control_repeats"][arm]) == 3  # raw, like repeats
        stages = ctl["arms"][arm]["stages"]
        assert len(stages["broadcast"]["samples_ms"]) == len(stages["gather"]["samples_ms"]) == 3
        pay = ctl["payload"][arm]
        for cost in [*pay["stages"].values(), pay["total"], pay["total_without_emulation"]]:
            assert cost["payload_ms"] == pytest.approx(cost["arm_ms"] - cost["control_ms"])
            iv = cost["interval"]
            assert iv["kind"] == "ci" and iv["low"] <= iv["high"]
        s = rep["summary"]
        key = arm.replace("-", "_")
        assert s[f"{key}_payload_ms"] == pytest.approx(pay["total"]["payload_ms"])
    assert set(ctl["payload_speedups"]) == {"deferred_vs_eager", "zero-copy_vs_eager",
                                            "zero-copy_vs_deferred"}  # fmt: skip
    for m in ctl["payload_speedups"].values():
        if m["median"] is None:
            assert m["reason"] and m["interval"]["kind"] == "none"
        else:
            assert m["median"] == pytest.approx(m["base_payload_ms"] / m["arm_payload_ms"])
            assert m["interval"]["kind"] in ("ci", "none")  # none: unbounded, with a reason
    s = rep["summary"]
    # a payload ratio is a verdict line only with its own interval (issue 28)
    bounded = [m for m in ctl["payload_speedups"].values() if m["interval"]["kind"] != "none"]
    assert ("payload cost (arm minus control)" in s["verdict"]) == bool(bounded)
    assert s["emulation_only_stages"] == ["gather"]
    assert s["floor_with_control_ms"] == pytest.approx(ctl["floor"]["control_ms"] + s["floor_ms"])
    assert any(n.startswith("EMULATION-ONLY stage gather") for n in rep["notes"])
    assert any(n.startswith("control + data floor") for n in rep["notes"])
    assert s["speedup_median"] > 0 and s["floor_ms"] > 0  # the older fields stay


@pytest.mark.slow
def test_control_renders_in_markdown_html_figure_and_terminal(run):
    out, _, output = run
    md = (out / "report.md").read_text()
    assert "## Control plane and payload cost" in md and "TOTAL without emulation-only" in md
    html = (out / "report.html").read_text()
    assert "Control plane and payload cost" in html and "Emulation-only stages" in html
    assert 'id="fig-payload"' in html
    assert (out / "payload.png").stat().st_size > 1000
    assert "Control plane and payload cost" in output  # the same table as report.md


@pytest.mark.slow
def test_gate_evidence_recomputes_payload_cost_from_control_repeats(run):
    _, rep, _ = run
    ev = micro_evidence(Report.from_dict(rep))
    assert ev.micro is not None
    payload = ev.micro.arms["deferred"].payload_ms
    assert payload is not None and math.isclose(payload, rep["summary"]["deferred_payload_ms"])
    speed = rep["summary"]["payload_speedup_deferred_vs_eager"]
    if speed is not None:
        derived = ev.micro.payload_speedup("deferred_vs_eager")
        assert derived is not None and math.isclose(derived, speed)
        bad = json.loads(json.dumps(rep))
        bad["summary"]["payload_speedup_deferred_vs_eager"] = speed * 2
        with pytest.raises(EvidenceError, match="payload_speedup_deferred_vs_eager"):
            micro_evidence(Report.from_dict(bad))
    rep["summary"]["deferred_payload_ms"] += 1.0
    with pytest.raises(EvidenceError, match="deferred_payload_ms"):
        micro_evidence(Report.from_dict(rep))
