"""``kimi-bench calibrate``: thresholds that hold the A/A false-failure rate, per metric,
and the detection power for an injected slowdown, on runs whose noise is known."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.ci.calibrate import calibrate, inject, rules_toml
from kimi_bench.ci.gate import evaluate
from kimi_bench.ci.metrics import metric_samples
from kimi_bench.ci.rules import BaselineRules, GateRules, load_rules
from kimi_bench.cli.main import app
from tests.ci_reports import micro, put

METRICS = ("micro.deferred.total_ms", "micro.speedup")


def _runs(n: int, run_drift: float, speed_noise: float, seed: int = 0) -> list[list]:
    """``n`` micro runs of one commit: every run's deferred time drifts by up to
    ``run_drift`` (the machine), the per-repeat speedup by ``speed_noise``."""
    rng = random.Random(seed)
    runs = []
    for _ in range(n):
        level = 20.0 * (1 + rng.uniform(-run_drift, run_drift))
        deferred = [level * (1 + rng.uniform(-0.05, 0.05)) for _ in range(12)]
        ups = [3.0 * (1 + rng.uniform(-speed_noise, speed_noise)) for _ in range(12)]
        runs.append([micro(deferred, ups)])
    return runs


def _rules(**baseline: object) -> GateRules:
    return GateRules(micro=None, baseline=BaselineRules(metrics=METRICS, **baseline))


def test_each_metric_gets_the_smallest_threshold_without_aa_failures_and_its_power() -> None:
    # the machine drifts +-25% run to run, the paired speedup only +-3% per repeat
    cal = calibrate(_runs(20, 0.25, 0.03), _rules(), slowdown=0.2)
    by = {m.metric: m for m in cal.metrics}
    assert cal.pairs == 10
    total, speedup = by["micro.deferred.total_ms"], by["micro.speedup"]
    assert total.false_failures == 0 and speedup.false_failures == 0
    # the drift forces a loose threshold on the absolute time; the ratio stays tight
    assert total.max_regression is not None and speedup.max_regression is not None
    assert speedup.max_regression < total.max_regression
    # a 20% slower deferred arm moves the speedup by 1/1.2 - 1 = -16.7%: caught every time
    assert speedup.detected == 10
    aa_fail, caught = cal.gate_level()
    assert aa_fail == 0 and caught == 10
    assert cal.thresholds() == {m.metric: m.max_regression for m in cal.metrics}


def test_injected_slowdown_scales_the_deferred_raw_samples() -> None:
    rep = _runs(1, 0.0, 0.0)[0][0]
    slow = inject(rep, "micro.deferred.total_ms", 0.25)
    before = metric_samples(rep, "micro.deferred.total_ms")
    after = metric_samples(slow, "micro.deferred.total_ms")
    assert after == [x * 1.25 for x in before]
    expected = [s / 1.25 for s in metric_samples(rep, "micro.speedup")]
    assert metric_samples(slow, "micro.speedup") == pytest.approx(expected)


def test_written_rules_round_trip_and_gate_with_per_metric_thresholds(tmp_path: Path) -> None:
    runs = _runs(8, 0.25, 0.03)
    cal = calibrate(runs, _rules(), slowdown=0.2)
    path = tmp_path / "rules.toml"
    path.write_text(rules_toml(_rules(), cal, "test"))
    rules = load_rules(path)
    assert rules.baseline is not None
    assert dict(rules.baseline.thresholds) == cal.thresholds()
    assert rules.baseline.max_regression == max(cal.thresholds().values())
    # an A/A pair passes; the same pair with a 20% slower deferred arm fails on the speedup
    ref, cand = put(runs[0][0], tmp_path / "ref"), runs[1][0]
    ok = evaluate([cand], rules, ref)
    assert all(r.verdict != "fail" for r in ok)
    # the slower commit, built like a real report (the gate refuses edited raw data)
    deferred = [x * 1.2 for x in metric_samples(cand, "micro.deferred.total_ms")]
    ups = [u / 1.2 for u in metric_samples(cand, "micro.speedup")]
    bad = evaluate([micro(deferred, ups)], rules, ref)
    failed = {r.rule for r in bad if r.verdict == "fail"}
    assert "baseline.micro.speedup" in failed


def test_a_threshold_for_a_metric_the_rules_do_not_gate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        '[baseline]\nmetrics = ["micro.speedup"]\n\n[baseline.thresholds]\n'
        '"micro.deferred.total_ms" = 0.1\n'
    )
    res = CliRunner().invoke(app, ["gate", str(tmp_path), "--rules", str(path)])
    assert res.exit_code == 2, res.output
    assert "not in metrics" in " ".join(res.output.split())


def test_cli_calibrates_earlier_run_folders(tmp_path: Path) -> None:
    folders = []
    for i, reps in enumerate(_runs(6, 0.2, 0.02, seed=3)):
        put(reps[0], tmp_path / f"run-{i}" / "micro")
        folders.append(tmp_path / f"run-{i}")
    rules = tmp_path / "rules-in.toml"
    rules.write_text('[baseline]\nmetrics = ["micro.deferred.total_ms", "micro.speedup"]\n')
    args = ["calibrate", "--rules", str(rules), "--output-dir", str(tmp_path / "cal")]
    for f in folders:
        args += ["--runs", str(f)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    written = load_rules(tmp_path / "cal" / "rules.toml")
    assert written.baseline is not None and set(written.baseline.thresholds) == set(METRICS)
    md = (tmp_path / "cal" / "calibration.md").read_text()
    assert "3 A/A pairs" in md and "micro.speedup" in md
