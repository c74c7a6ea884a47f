"""``gate --history``: change points over synthetic run histories whose right answer is
known (a step, a drift, pure noise, an improvement)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kimi_bench.ci.history import (
    HistoryError,
    HistoryLine,
    check_line,
    history_rules,
    load_history,
    newest_segment,
)
from kimi_bench.cli.main import app


def lines(values: list[float], metric: str = "deferred_median_ms") -> list[dict]:
    return [
        {"kind": "micro", metric: v, "git": f"c{i:03d}", "created": f"2026-12-01T{i:02d}"}
        for i, v in enumerate(values)
    ]


def parsed(values: list[float], metric: str = "deferred_median_ms") -> list[HistoryLine]:
    return [check_line(d, f"line {i}") for i, d in enumerate(lines(values, metric))]


def step(seed: int, n_before: int = 30, n_after: int = 5, jump: float = 0.15) -> list[float]:
    rng = np.random.default_rng(seed)
    before = rng.normal(100.0, 3.0, n_before)
    after = rng.normal(100.0 * (1 + jump), 3.0, n_after)
    return [float(x) for x in np.r_[before, after]]


def noise(seed: int, n: int = 40) -> list[float]:
    rng = np.random.default_rng(10_000 + seed)
    return [float(x) for x in rng.normal(100.0, 3.0, n)]


@pytest.mark.parametrize("seed", range(5))
def test_a_step_is_flagged_at_its_first_commit(seed):
    (res,) = history_rules(parsed(step(seed)), {"micro": ("deferred_median_ms",)})
    assert res.verdict == "fail"
    assert "run 31 of 35 (commit c030)" in res.reason and res.measured > 0.1


def test_a_drift_is_flagged():
    rng = np.random.default_rng(1)
    drift = [float(x) for x in 100 + np.arange(40) * 0.8 + rng.normal(0, 3, 40)]
    (res,) = history_rules(parsed(drift), {"micro": ("deferred_median_ms",)})
    assert res.verdict == "fail" and "regression from change point" in res.reason


def test_an_improvement_is_not_a_regression():
    better = [200.0 - x for x in step(3)]  # the same step, downwards (faster)
    (res,) = history_rules(parsed(better), {"micro": ("deferred_median_ms",)})
    assert res.verdict == "pass" and res.reason.startswith("an improvement")


def test_higher_is_better_metrics_regress_downwards():
    values = [10.0 - (x - 100.0) / 10.0 for x in step(4)]  # speedup falls at the step
    (res,) = history_rules(parsed(values, "speedup_median"), {"micro": ("speedup_median",)})
    assert res.verdict == "fail"


@pytest.mark.slow
def test_pure_noise_stays_quiet():
    """False alarms over 100 synthetic noise histories of 40 runs (N(100, 3)): the rate is
    recorded in the README (Using it in CI); it must stay at most 2%."""
    alarms = 0
    for seed in range(100):
        (res,) = history_rules(parsed(noise(seed)), {"micro": ("deferred_median_ms",)})
        alarms += res.verdict == "fail"
    assert alarms <= 2, alarms


def test_short_histories_are_skipped_not_passed():
    (res,) = history_rules(parsed([1.0, 2.0, 3.0]), {"micro": ("deferred_median_ms",)})
    assert res.verdict == "skip" and "at least 6" in res.reason


def test_two_bad_runs_are_not_yet_a_regression():
    values = step(0, n_before=30, n_after=2)  # fewer than min_size (3) runs after the step
    (res,) = history_rules(parsed(values), {"micro": ("deferred_median_ms",)})
    assert res.verdict == "pass"
    f = newest_segment(values, higher_better=False)
    assert f is None or len(values) - f.start >= 3


def test_cli_history_names_the_first_bad_commit(tmp_path: Path):
    hist = tmp_path / "runs.jsonl"
    hist.write_text("\n".join(json.dumps(x) for x in lines(step(0))) + "\n")
    res = CliRunner().invoke(app, ["gate", "--history", str(hist)], env={"COLUMNS": "300"})
    assert res.exit_code == 1, res.output
    assert "c030" in res.output and "history.micro.deferred_median_ms" in res.output
    quiet = tmp_path / "quiet.jsonl"
    quiet.write_text("\n".join(json.dumps(x) for x in lines(noise(1))) + "\n")
    res = CliRunner().invoke(app, ["gate", "--history", str(quiet)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output


def test_cli_history_bad_lines_are_a_usage_error(tmp_path: Path):
    hist = tmp_path / "runs.jsonl"
    hist.write_text('{"kind": "micro"}\nnot json\n')
    res = CliRunner().invoke(app, ["gate", "--history", str(hist)])
    assert res.exit_code == 2 and "runs.jsonl:2:notaJSONline" in "".join(res.output.split())
    with pytest.raises(HistoryError, match="history file not found"):
        load_history(tmp_path / "missing.jsonl")
