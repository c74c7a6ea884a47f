"""A run is gated against a baseline that decoded with the same decoder: on the H200 the PIL
era's photo runs and the GPU-decode runs share every other setup key, and the gate once
paired them (deferred +63% "slower" than a baseline whose producers decoded 6x faster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimi_bench.ci.baseline import BaselineError, find_baseline
from kimi_bench.ci.comparable import decoder_used, differences
from kimi_bench.report.model import load_report

H200 = Path(__file__).resolve().parents[2] / "reports" / "baselines" / "h200"
PIL_RUN = H200 / "deferred-decode" / "micro" / "pr-33921" / "r8-pickle-photo" / "report.json"
GPU_RUN = H200 / "gpu-decode" / "micro" / "pr-33921" / "r8-pickle-photo" / "report.json"


def test_the_decoder_a_run_used_is_read_from_its_report() -> None:
    assert decoder_used(load_report(PIL_RUN)) == "pil"  # before decoders were chosen
    assert decoder_used(load_report(GPU_RUN)) == "nvjpeg"
    parity = load_report(H200 / "gpu-decode" / "parity" / "jpeg-sglang-0.5.23" / "report.json")
    assert decoder_used(parity) == "nvimgcodec,pil"  # JPEGs on the GPU, the PNG with PIL


def test_another_decoder_is_a_hard_difference_and_no_baseline() -> None:
    pil, gpu = load_report(PIL_RUN), load_report(GPU_RUN)
    (diff,) = [d for d in differences(pil, gpu) if d.hard]
    assert (diff.what, diff.a, diff.b) == ("decoder", "pil", "nvjpeg")
    with pytest.raises(BaselineError, match="decoder 'pil' vs 'nvjpeg'"):
        find_baseline(pil, GPU_RUN.parent, required=True)


MICRO = H200 / "micro" / "sglang-0.5.23" / "r8-shm"
REPEATS = H200 / "hash-rerun" / "micro-repeats" / "sglang-0.5.23" / "r8-shm"


def test_a_run_with_repeated_images_is_no_baseline_for_one_without() -> None:
    """Half of the images repeating makes 0.5.23's preprocess cache hit: another workload,
    never a baseline (the gate once paired them and failed over_yardstick +21%)."""
    run, repeats = load_report(MICRO), load_report(REPEATS)
    hard = [d for d in differences(run, repeats) if d.hard]
    assert [(d.what, d.a, d.b) for d in hard] == [("repeat_share", 0.0, 0.5)]
    with pytest.raises(BaselineError, match=r"repeat_share 0\.0 vs 0\.5"):
        find_baseline(run, REPEATS, required=True)


def test_a_capacity_search_is_complete_with_only_the_rates_each_arm_probed() -> None:
    from kimi_bench.ci.evidence_rows import serve_evidence

    capacity = load_report(H200 / "mixed-workload" / "capacity" / "pr-33921")
    ev = serve_evidence(capacity)
    assert ev.complete, ev.incomplete_why
    assert ev.serve is not None and ev.serve.failed == 0


def test_another_image_content_is_a_hard_difference() -> None:
    """Random pixels and photos encode to very different JPEG sizes and decode costs: a
    serve-ab run of one is no baseline for the other (a content mix included)."""
    from kimi_bench.report.model import Report

    run = load_report(H200 / "mixed-workload" / "capacity" / "pr-33921")
    other = Report.from_dict(run.to_dict())
    other.config["image_content"] = "photo:3,random:1"
    hard = [(d.what, d.a, d.b) for d in differences(run, other) if d.hard]
    assert hard == [("image_content", run.config["image_content"], "photo:3,random:1")]
    older = Report.from_dict(run.to_dict())
    del older.config["image_content"]  # a report from before it was recorded: random
    assert [d.what for d in differences(older, run) if d.hard] == (
        [] if run.config["image_content"] == "random" else ["image_content"]
    )
