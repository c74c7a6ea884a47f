"""kimi_bench.infra.stats and the host-load record, against hand-computed values."""

import json
import math
import os

import numpy as np
import pytest
import torch

from kimi_bench.infra import environment as env_mod
from kimi_bench.infra.environment import HostLoad, HostLoadRecord, environment, host_load
from kimi_bench.infra.stats import (
    MIN_UNITS,
    NOISE_GROSS,
    NOISE_WARN,
    Interval,
    Measurement,
    cluster_bootstrap,
    pct_delta,
)
from kimi_bench.infra.stats.compare import (
    SIGNIFICANT,
    STRADDLES_ZERO,
    TOO_FEW_UNITS,
    compare,
    ratio,
)
from kimi_bench.infra.stats.format import fmt_ms, fmt_pct
from kimi_bench.infra.stats.rank_test import mann_whitney


def batched(values_by_batch: list[list[float]], label: str) -> Measurement:
    """Requests with the forward batch each was served in as their independent unit."""
    xs = [x for batch in values_by_batch for x in batch]
    ids = [i for i, batch in enumerate(values_by_batch) for _ in batch]
    return Measurement(xs, "ms", label, ids)


def test_summaries_hand_values():
    m = Measurement([50, 10, 40, 20, 30], "ms", "total")
    assert (m.n, m.n_units, m.median, m.mean, m.min, m.max) == (5, 5, 30, 30, 10, 50)
    assert (m.p10, m.p25, m.p75, m.p90) == (14, 20, 40, 46)  # linear interpolation
    assert m.iqr == 20 and m.noise == pytest.approx(20 / 30)
    empty = Measurement([])
    assert empty.n == 0 and math.isnan(empty.median) and math.isnan(empty.noise)
    assert empty.interval().kind == "none" and not empty.noisy
    with pytest.raises(ValueError, match="finite"):
        Measurement([1.0, math.nan])
    with pytest.raises(ValueError, match="2 unit ids for 3 samples"):
        Measurement([1, 2, 3], unit_ids=["a", "b"])


def test_zero_width_case_from_the_issue_is_not_significant():
    # 12 requests per arm, 10 of them served in one forward batch: 2 independent units.
    eager = batched([[100.0] * 10, [150.0, 152.0]], "eager")
    deferred = batched([[162.3] * 10, [200.0, 210.0]], "deferred")
    assert (eager.n, eager.n_units) == (12, 2)
    c = compare(eager, deferred)
    assert c.delta_pct == pytest.approx(62.3)
    assert c.significant is False and c.verdict == TOO_FEW_UNITS
    assert not c.interval.is_ci and c.interval.kind == "range"
    assert c.interval.fmt(pct=True).endswith("(range over 2 units, not a confidence interval)")
    assert c.as_dict()["significant"] is False and c.as_dict()["interval"]["kind"] == "range"
    # the old mistake, for contrast: the same requests taken as independent samples give a
    # zero-width "interval" +62.3% .. +62.3% that looks significant
    as_requests = compare(Measurement(eager.samples), Measurement(deferred.samples))
    assert as_requests.interval.low == pytest.approx(62.3)
    assert as_requests.interval.high == pytest.approx(62.3)
    assert as_requests.significant


def test_no_significance_below_three_units_per_side_even_with_a_huge_shift():
    for k in range(1, MIN_UNITS):
        a = Measurement([10.0 + i for i in range(k)])
        b = Measurement([1000.0 + i for i in range(20)])
        c = compare(a, b)
        assert (c.a_units, c.b_units) == (k, 20)
        assert not c.significant and c.verdict == TOO_FEW_UNITS
        assert not compare(b, a).significant


def test_compare_significant_and_straddling():
    eager = Measurement([100, 102, 98, 101, 99], label="eager")
    deferred = Measurement([50, 51, 49, 52, 48], label="deferred")
    c = compare(eager, deferred)
    assert (c.a_value, c.b_value) == (100, 50)
    assert c.delta_pct == -50.0  # deferred minus eager, relative to eager
    assert c.verdict == SIGNIFICANT and c.interval.is_ci and c.interval.high < 0
    assert c.test.method == "exact" and c.test.p_value == pytest.approx(2 / 252)
    same = compare(eager, Measurement([101, 99, 100, 98, 102]))
    assert same.delta_pct == 0 and same.verdict == STRADDLES_ZERO and not same.significant
    assert same.interval.low <= 0 <= same.interval.high
    zero = compare(Measurement([0, 0, 0], label="idle"), deferred)
    assert "is zero" in zero.verdict and not zero.significant and zero.interval.kind == "none"
    with pytest.raises(ValueError, match="cannot compare 'ms' with 'req/s'"):
        compare(eager, Measurement([1, 2, 3], "req/s"))


def test_interval_over_fewer_than_three_repeats_is_not_a_ci():
    two = Measurement([10.0, 12.0], label="total")
    iv = two.interval()
    assert iv.kind == "range" and not iv.is_ci and iv.confidence is None
    assert (iv.low, iv.high) == (10.0, 12.0)
    assert "not a confidence interval" in iv.reason
    assert "CI" not in iv.fmt(unit="ms")
    assert any("only 2 independent unit(s)" in w for w in two.warnings)
    three = Measurement([10.0, 12.0, 11.0]).interval()
    assert three.is_ci and three.confidence == 0.95 and "(95% CI over 3 units)" in three.fmt()


def test_cluster_bootstrap_resamples_units_and_is_deterministic():
    m = batched([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [3.0, 3.0, 3.0]], "ttft")
    assert m.n_units == 3 and m.unit_values() == [1.0, 2.0, 3.0]
    iv = m.interval(seed=7)
    # a resample of 3 units has median 1 with probability 7/27: both tails are reached
    assert (iv.low, iv.high) == (1.0, 3.0) and iv.method.endswith("units (clusters)")
    rough = batched([[10.0, 11.0], [12.0, 15.0, 13.0], [20.0], [9.0, 30.0]], "ttft")
    first = rough.interval(seed=3)
    assert first == rough.interval(seed=3) == Measurement(**_fields(rough)).interval(seed=3)
    many = batched([[float(i), i + 0.5 * (i % 3)] for i in range(40)], "ttft")
    assert many.interval(seed=3) != many.interval(seed=4)  # the seed is used
    assert rough.min <= first.low <= rough.median <= first.high <= rough.max
    c1, c2 = compare(rough, m, seed=1), compare(rough, m, seed=1)
    assert c1 == c2


def test_weighted_cluster_bootstrap_equals_pooling_the_drawn_units():
    groups = [np.array(g) for g in ([5.0, 1.0, 9.0], [2.0], [7.0, 7.0], [3.0, 8.0, 4.0, 6.0])]
    picks = np.random.default_rng(11).integers(0, len(groups), size=(200, len(groups)))
    for q in (0, 10, 50, 90, 100):
        pooled = [np.percentile(np.concatenate([groups[i] for i in row]), q) for row in picks]
        fast = cluster_bootstrap(groups, q, np.random.default_rng(11), 200)
        assert fast.tolist() == pytest.approx(pooled, abs=1e-12)


def _fields(m: Measurement) -> dict:
    return {"samples": list(m.samples), "unit": m.unit, "label": m.label, "unit_ids": m.unit_ids}


def test_noise_flag_at_the_torch_thresholds():
    assert (NOISE_WARN, NOISE_GROSS) == (0.10, 0.25)
    at_warn = Measurement([90, 95, 100, 105, 110], label="x")  # IQR 10 / median 100
    assert at_warn.noise == 0.10 and at_warn.noisy
    assert at_warn.warnings == (
        "x: IQR is 10.0% of the median (>= 10%): this could indicate system fluctuation",
    )
    below = Measurement([91, 95.5, 100, 104.4, 109])  # IQR 8.9 / median 100
    assert below.noise == pytest.approx(0.089) and not below.noisy and below.warnings == ()
    gross = Measurement([70, 87.5, 100, 112.5, 130], label="y")  # IQR 25 / median 100
    assert gross.noise == 0.25 and "significant environmental influence" in gross.warnings[0]


def test_percent_sign_convention_and_formatting():
    assert pct_delta(100.0, 112.3) == pytest.approx(12.3)  # B above A: positive
    assert pct_delta(200.0, 150.0) == -25.0  # B below A: negative
    assert math.isnan(pct_delta(0.0, 5.0))
    assert fmt_pct(12.34) == "+12.3%" and fmt_pct(-5) == "-5.0%" and fmt_pct(0) == "+0.0%"
    assert fmt_pct(None) == "n/a" and fmt_pct(math.nan) == "n/a" and fmt_pct(math.inf) == "n/a"
    assert fmt_ms(1234.4) == "1234 ms" and fmt_ms(12.345) == "12.3 ms"
    assert fmt_ms(1.234) == "1.23 ms" and fmt_ms(0.001234) == "0.0012 ms" and fmt_ms(None) == "n/a"


def test_mann_whitney_exact_hand_values():
    # x = 1, 2, 3 below every y: U_x = 0, and 1 of the C(7, 3) = 35 equally likely rank
    # sets gives U_x <= 0, so one-sided p = 1/35 and two-sided 2/35.
    low = mann_whitney([1, 2, 3], [4, 5, 6, 7], "less")
    assert (low.u, low.method, low.p_value) == (0, "exact", pytest.approx(1 / 35))
    assert mann_whitney([1, 2, 3], [4, 5, 6, 7]).p_value == pytest.approx(2 / 35)
    gate = mann_whitney([4, 5, 6, 7], [1, 2, 3], "greater")  # "new is larger" (worse)
    assert gate.u == 12 and gate.p_value == pytest.approx(1 / 35)
    # x = 1, 4, 6 against 2, 3, 5, 7: U_x = 0 + 2 + 3 = 5 (rank sum 11). Rank sums of 3 of
    # 1..7 that are <= 11: 1+1+2+3+4+4 = 15 of 35, <= 10: 11 of 35.
    mid = mann_whitney([1, 4, 6], [2, 3, 5, 7], "less")
    assert mid.u == 5 and mid.p_value == pytest.approx(15 / 35)
    assert mann_whitney([1, 4, 6], [2, 3, 5, 7], "greater").p_value == pytest.approx(24 / 35)
    assert mann_whitney([1, 4, 6], [2, 3, 5, 7]).p_value == pytest.approx(30 / 35)


def test_mann_whitney_with_ties_uses_the_normal_approximation():
    # x = 1, 1, 2 and y = 2, 3, 3: ranks 1.5 1.5 3.5 | 3.5 5.5 5.5, U_x = 6.5 - 6 = 0.5;
    # variance 3*3/12 * (7 - 3*(2**3 - 2) / (6*5)) = 4.8; continuity-corrected |z| = 3.5/sd
    res = mann_whitney([1, 1, 2], [2, 3, 3])
    assert res.method == "asymptotic" and res.u == 0.5
    assert res.p_value == pytest.approx(math.erfc(3.5 / math.sqrt(4.8) / math.sqrt(2)))
    empty = mann_whitney([], [1.0])
    assert empty.method == "none" and math.isnan(empty.p_value)
    with pytest.raises(ValueError, match="alternative"):
        mann_whitney([1], [2], "bigger")


def test_ratio_paired_per_repeat_and_unpaired():
    eager = Measurement([10.0, 20.0, 30.0], label="eager")
    deferred = Measurement([5.0, 10.0, 10.0], label="deferred")
    speedup = ratio(eager, deferred)
    assert speedup.samples == (2.0, 2.0, 3.0) and speedup.unit == "x" and speedup.median == 2.0
    assert speedup.label == "eager / deferred"
    short = ratio(eager, Measurement([5.0, 10.0]))  # a run that stopped one repeat early
    assert short.samples == (2.0, 2.0)
    unpaired = ratio(eager, deferred, paired=False)
    assert unpaired.samples == (2.0,) and unpaired.n_units == 1
    with pytest.raises(ValueError, match="no unit id is present on both sides"):
        ratio(batched([[1.0]], "a"), Measurement([1.0], unit_ids=["z"]))


def test_measurement_and_interval_round_trip_through_json():
    m = batched([[10.0, 11.0], [12.0], [14.0, 9.5]], "ttft_ms")
    d = json.loads(json.dumps(m.as_dict()))
    assert d["samples"] == [10.0, 11.0, 12.0, 14.0, 9.5] and d["median"] == 11.0
    assert d["n_units"] == 3 and d["unit"] == "ms"
    assert Measurement.from_dict(d) == m
    legacy = Measurement.from_dict({"samples_ms": [1.0, 2.0], "median": 1.5}, label="old")
    assert legacy == Measurement([1.0, 2.0], "ms", "old")
    with pytest.raises(ValueError, match="no 'samples'"):
        Measurement.from_dict({"median": 3.0})
    iv = m.interval()
    assert Interval.from_dict(json.loads(json.dumps(iv.as_dict()))) == iv
    none = Interval.from_dict(
        {
            "low": None,
            "high": None,
            "kind": "none",
            "method": "",
            "n_units": 0,
            "confidence": None,
            "reason": "no samples",
        }
    )
    assert math.isnan(none.low) and none.fmt() == "n/a (no samples)"


def test_host_load_fields():
    snap = host_load()
    want_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    assert snap.cpus >= 1 and (want_cpus is None or snap.cpus == want_cpus)
    assert all(v >= 0 for v in (snap.load_1m, snap.load_5m, snap.load_15m))
    edge = HostLoad(2.01, 1.0, 1.0, 2, "t")  # busy means the 1-minute load exceeds the cores
    assert edge.busy and not HostLoad(2.0, 9.0, 9.0, 2, "t").busy
    assert HostLoad.from_dict(json.loads(json.dumps(snap.as_dict()))) == snap
    busy = HostLoad(3.5, 2.0, 1.0, 2, "t0")
    quiet = HostLoad(2.0, 2.0, 2.0, 2, "t1")  # load equal to the core count is not above it
    assert busy.busy and not quiet.busy
    rec = HostLoadRecord(busy, quiet)
    assert rec.busy and rec.warning() is not None
    assert "1-minute load average 3.5 at start, 2.0 at end on 2 usable CPUs" in rec.warning()
    assert HostLoadRecord(quiet, quiet).warning() is None
    assert HostLoadRecord.from_dict(json.loads(json.dumps(rec.as_dict()))) == rec


def test_host_load_without_load_averages(monkeypatch):
    def unsupported() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(env_mod.os, "getloadavg", unsupported)
    snap = host_load()
    assert math.isnan(snap.load_1m) and not snap.busy


def test_environment_records_host_load_at_start_and_end():
    start = HostLoad(9.0, 1.0, 1.0, 4, "start")
    block = environment(torch.device("cpu"), "kimi-k3", 0, load_start=start)["host_load"]
    assert block["start"]["load_1m"] == 9.0 and block["start"]["busy"] is True
    assert block["end"]["cpus"] >= 1 and block["busy"] is True
    assert block["warning"].startswith("busy host: 1-minute load average 9.0 at start")
    plain = environment(torch.device("cpu"), "kimi-k3", 0)["host_load"]
    assert plain["start"] is None and "load_1m" in plain["end"]
