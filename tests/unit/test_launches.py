"""The re-run interval (``stats.launches``) and micro reports measured in several launches:
the interval widens with the spread between launches, is never narrower than a one-launch
CI of the same data, covers re-runs of a simulated random-effects machine, and a report
records its launches; the read-back check refuses a report whose stated interval was
edited."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kimi_bench.infra.stats.launches import (
    BETWEEN,
    PREDICTION,
    WITHIN,
    rerun_interval,
    speedup_interval,
)
from kimi_bench.report import verdicts
from kimi_bench.report.model import ReportError, load_report
from tests import ci_reports


def _machine(
    rng: np.random.Generator, launches: int, repeats: int, between: float, within: float
) -> tuple[list[float], list[int]]:
    """A random-effects run: each launch draws its own offset (``between``), each repeat
    its own noise around it (``within``), around 2.0."""
    xs: list[float] = []
    ids: list[int] = []
    for k in range(launches):
        offset = rng.normal(0.0, between)
        xs += list(2.0 + offset + rng.normal(0.0, within, repeats))
        ids += [k] * repeats
    return xs, ids


def _width(xs: list[float], ids: list[int]) -> float:
    iv, _ = rerun_interval(xs, ids, resamples=1000)
    return iv.high - iv.low


def test_interval_widens_as_the_spread_between_launches_grows() -> None:
    rng = np.random.default_rng(7)
    base = [rng.normal(0.0, 0.05, 20) for _ in range(5)]  # the same within-launch noise
    widths, dominant = [], []
    for between in (0.0, 0.05, 0.2):
        offsets = np.linspace(-between, between, 5)  # launches apart by design
        xs = [float(2.0 + o + e) for o, noise in zip(offsets, base, strict=True) for e in noise]
        ids = [k for k in range(5) for _ in range(20)]
        iv, sp = rerun_interval(xs, ids, resamples=1000)
        assert iv.kind == PREDICTION and iv.n_units == 5 and iv.low < np.median(xs) < iv.high
        widths.append(iv.high - iv.low)
        dominant.append(sp.dominant)
    assert widths[0] < widths[1] < widths[2]
    assert widths[2] > 3 * widths[0]
    assert dominant[0] == WITHIN and dominant[2] == BETWEEN


@pytest.mark.parametrize("between", [0.0, 0.02, 0.2])
def test_never_narrower_than_a_one_launch_ci_of_the_same_data(between: float) -> None:
    xs, ids = _machine(np.random.default_rng(3), 5, 16, between, 0.1)
    one, _ = rerun_interval(xs, [0] * len(xs), resamples=1000)
    assert one.kind == "ci" and "one launch" in one.reason  # says it promises no re-run
    assert _width(xs, ids) > one.high - one.low


def test_seeded_deterministic_and_one_launch_is_the_within_launch_ci() -> None:
    xs, ids = _machine(np.random.default_rng(11), 4, 10, 0.1, 0.1)
    a, sa = rerun_interval(xs, ids, seed=5)
    b, sb = rerun_interval(xs, ids, seed=5)
    assert (a.low, a.high, sa.between_var) == (b.low, b.high, sb.between_var)
    assert sa.launches == 4 and sa.samples == 40 and len(sa.launch_medians) == 4
    assert sa.launch_medians[0] == pytest.approx(float(np.median(xs[:10])))
    # with one launch: exactly the bootstrap CI over repeats that micro gave before
    from kimi_bench.infra.stats import Measurement

    one, _ = rerun_interval(xs, [0] * len(xs))
    old = Measurement(xs, "x").interval()
    assert (one.low, one.high, one.kind) == (old.low, old.high, "ci")


def test_a_speedup_interval_is_a_factor_around_the_median_and_refuses_bad_input() -> None:
    xs, ids = _machine(np.random.default_rng(2), 3, 8, 0.3, 0.2)
    iv, sp = speedup_interval(xs, ids)
    med = float(np.median(xs))
    assert iv.low > 0 and iv.low * iv.high == pytest.approx(med * med)
    assert sp.launch_medians[1] == pytest.approx(float(np.median(xs[8:16])))  # not in logs
    with pytest.raises(ValueError, match="launch ids"):
        rerun_interval(xs, ids[:-1])
    with pytest.raises(ValueError, match="positive"):
        speedup_interval([1.0, -1.0, 2.0], [0, 1, 1])


def test_covers_a_re_runs_median_on_a_simulated_machine() -> None:
    """Random-effects runs (5 launches x 16 repeats, launches apart as much as repeats):
    one run's interval covers the next run's median in at least 90% of the pairs, where
    the one-launch CI of the same data covers far fewer."""
    rng = np.random.default_rng(2026)
    runs = [_machine(rng, 5, 16, 0.1, 0.1) for _ in range(40)]
    meds = [float(np.median(xs)) for xs, _ in runs]
    ivs = [rerun_interval(xs, ids, resamples=500)[0] for xs, ids in runs]
    ones = [rerun_interval(xs, [0] * len(xs), resamples=500)[0] for xs, _ in runs]
    pairs = [(i, j) for i in range(40) for j in range(40) if i != j]
    hit = sum(ivs[i].low <= meds[j] <= ivs[i].high for i, j in pairs) / len(pairs)
    hit_one = sum(ones[i].low <= meds[j] <= ones[i].high for i, j in pairs) / len(pairs)
    assert hit >= 0.9
    assert hit_one < 0.75


def test_a_micro_report_records_its_launches_and_refuses_an_edited_interval(tmp_path) -> None:
    deferred = [10.0 + (i % 3) for i in range(12)]
    ups = [2.0 + 0.1 * (i // 3) + 0.01 * (i % 3) for i in range(12)]  # launches apart
    report = ci_reports.micro(deferred, ups, launches=4)
    assert [r["launch"] for r in report.data["repeats"]["deferred"]] == [
        k for k in range(4) for _ in range(3)
    ]
    s = report.summary
    assert s["launches"] == 4 and s["launches_completed"] == 4
    assert s["speedup_interval"]["kind"] == PREDICTION
    assert s["speedup_interval"]["n_units"] == 4
    assert s["speedup_spread_dominated_by"] == BETWEEN
    assert report.data["speedup"]["spread"]["launches"] == 4
    assert any("prediction interval for a re-run's median" in n for n in report.notes)
    assert "re-run interval" in s["verdict"] and "4 launches" in s["verdict"]
    shown = [line.text for line in verdicts.lines(report.to_dict())]  # terminal, md, html
    assert any("95% re-run interval" in t and "4 launches" in t for t in shown), shown
    path = ci_reports.put(report, tmp_path / "m").parent
    load_report(path)  # as written: every derived figure agrees with the raw repeats
    raw = json.loads((path / "report.json").read_text())
    raw["speedup"]["interval"]["high"] *= 1.05
    (path / "report.json").write_text(json.dumps(raw))
    with pytest.raises(ReportError, match=r"speedup\.interval\.high"):
        load_report(path)
    raw["speedup"]["interval"]["high"] /= 1.05
    raw["summary"]["speedup_interval"]["low"] *= 0.95
    (path / "report.json").write_text(json.dumps(raw))
    with pytest.raises(ReportError, match=r"summary\.speedup_interval\.low"):
        load_report(path)
