"""Verdicts in plain words: a ratio below 1 reads "slower", never "0.81x faster"; report
labels read as words, not as Python values ("parity[kimi-k3, None]")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kimi_bench import SCHEMA_VERSION
from kimi_bench.bench.micro_report import verdict
from kimi_bench.ci.gate import report_label
from kimi_bench.ci.kind_rules import floor_reason
from kimi_bench.cli.main import app
from kimi_bench.infra.stats.format import fmt_speedup, fmt_speedup_range
from kimi_bench.report.model import Report


def test_speedups_in_plain_words():
    assert fmt_speedup(0.81, "deferred") == "1.23x slower than deferred"
    assert fmt_speedup(2.64, "eager") == "2.64x faster than eager"
    assert fmt_speedup(1.001, "eager") == "as fast as eager (1.00x)"
    assert fmt_speedup(None) == fmt_speedup(float("nan")) == "n/a"
    assert fmt_speedup_range(0.7, 0.9) == "1.11-1.43x slower"
    assert fmt_speedup_range(1.2, 3.77) == "1.20-3.77x faster"
    assert fmt_speedup_range(0.9, 1.1) == "1.11x slower to 1.10x faster"


def _speed(median: float, low: float, high: float, kind: str = "ci") -> dict:
    return {"median": median, "interval": {"low": low, "high": high, "kind": kind}}


def test_micro_verdict_says_slower_for_a_ratio_below_one():
    speed = {
        "deferred_vs_eager": _speed(2.64, 1.21, 3.77),
        "zero-copy_vs_deferred": _speed(0.81, 0.75, 0.9),
        "zero-copy_vs_eager": _speed(2.1, 0.9, 2.5, "range"),
    }
    text = verdict(None, [True] * 10, speed, ["eager", "deferred", "zero-copy"])
    # a CI (not a re-run interval) says it rests on one launch
    assert "zero-copy 1.23x slower than deferred (95% CI 1.11-1.33x slower, one launch)" in text
    assert "deferred 2.64x faster than eager (95% CI 1.21-3.77x faster, one launch)" in text
    assert "range 1.11x slower to 2.50x faster, too few repeats for a CI" in text
    assert "0.81x" not in text
    rerun = _speed(2.2, 1.4, 3.5, "prediction")
    rerun["interval"]["n_units"] = 5
    text = verdict(None, [True] * 10, {"deferred_vs_eager": rerun}, ["eager", "deferred"])
    assert (
        "deferred 2.20x faster than eager (95% re-run interval 1.40-3.50x faster, 5 launches)"
        in text
    )


def _parity(config: dict) -> Report:
    rows = [{"name": "a.png", "error": None, "bit_exact_fp32": True, "bit_exact_bf16": True}]
    return Report("parity", {"device_name": "cpu"}, config, rows, {"accepted": 1})


def test_report_labels_read_as_words(tmp_path: Path):
    k3 = {"preprocess": {"name": "kimi-k3"}, "policy": None, "images": None}
    assert report_label(_parity(k3)) == "parity (kimi-k3, built-in corpus)"
    mine = k3 | {"images": "/data/photos", "policy": "image"}
    assert report_label(_parity(mine)) == (
        "parity (kimi-k3, images in /data/photos, per-image decisions)"
    )
    # as the user sees it: the gate table of a saved report
    rep = _parity(k3).to_dict() | {"schema_version": SCHEMA_VERSION}
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "report.json").write_text(json.dumps(rep))
    res = CliRunner().invoke(app, ["gate", str(tmp_path / "p")], env={"COLUMNS": "200"})
    assert "parity (kimi-k3, built-in corpus)" in res.output, res.output
    assert "None" not in res.output


def test_a_median_below_the_floor_is_called_a_measurement_problem():
    assert "measurement problem" in floor_reason(0.8, 20)
    assert floor_reason(12.0, 20) == "deferred takes 12.0x the floor, allowed <= 20x"
