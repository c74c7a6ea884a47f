import math

import pytest

from kimi_bench.infra.stats import Measurement, pct_delta, percentile
from kimi_bench.infra.stats.compare import compare
from kimi_bench.options import parse_rates
from kimi_bench.serving.trace import arrival_offsets


def test_percentile_hand_values():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(1, 11)), 90) == pytest.approx(9.1)
    assert percentile([5], 99) == 5
    assert percentile([3, 1, 2], 0) == 1 and percentile([3, 1, 2], 100) == 3
    assert math.isnan(percentile([], 50))
    m = Measurement([10, 20, 30, 40, 50])
    assert (m.median, m.p10, m.p90, m.mean) == (30, 14, 46, 30)


def test_signed_percent_delta_and_interval():
    assert pct_delta(100, 21) == pytest.approx(-79.0)
    a = Measurement([100.0 + (i % 5) for i in range(50)])
    b = Measurement([50.0 + (i % 5) for i in range(50)])
    c = compare(a, b)
    assert c.delta_pct == pytest.approx((52 - 102) / 102 * 100)
    iv = c.interval
    assert iv.low <= c.delta_pct <= iv.high < 0 and c.significant  # below zero
    # any resample's medians lie within 100..104 and 50..54, so must the interval's ends
    assert iv.low >= (50 - 104) / 104 * 100 and iv.high <= (54 - 100) / 100 * 100
    same = compare(a, a)
    assert same.interval.low <= 0 <= same.interval.high and not same.significant


def test_poisson_arrivals_are_seeded_with_the_right_mean():
    t1 = arrival_offsets(8.0, 4000, 1.0, seed=3)
    assert t1 == arrival_offsets(8.0, 4000, 1.0, seed=3)
    assert t1 != arrival_offsets(8.0, 4000, 1.0, seed=4)
    gaps = [b - a for a, b in zip((0.0, *t1[:-1]), t1, strict=True)]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(1 / 8, rel=0.05)
    cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps)) / mean
    assert cv == pytest.approx(1.0, rel=0.08)  # exponential gaps


def test_gamma_burstiness_keeps_the_mean_and_changes_the_spread():
    t = arrival_offsets(2.0, 4000, burstiness=4.0, seed=0)
    gaps = [b - a for a, b in zip((0.0, *t[:-1]), t, strict=True)]
    mean = sum(gaps) / len(gaps)
    cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps)) / mean
    assert mean == pytest.approx(0.5, rel=0.05)
    assert cv == pytest.approx(0.5, rel=0.1)  # 1 / sqrt(4)


def test_inf_rate_and_rate_parsing():
    assert arrival_offsets(math.inf, 3) == (0.0, 0.0, 0.0)
    assert parse_rates("2, 8,inf") == (2.0, 8.0, math.inf)
    for bad in ("0", "-1", "fast", "nan", "1e308", "1e-300", ""):
        with pytest.raises(ValueError):
            parse_rates(bad)


def test_serve_options_scenario_then_cli_overrides():
    from kimi_bench.bench.scenario import scenario_table
    from kimi_bench.cli.build import build
    from kimi_bench.options import ServeOptions

    table = scenario_table("serve-ab", "serve_ab")
    opts = build(ServeOptions, {**table, "ranks": 2, "rates": "4,inf"})
    assert opts.ranks == 2 and opts.rates == (4.0, math.inf)  # the command line wins
    assert opts.requests == 200 and opts.resolution == (1536, 1024)  # the file values
    assert opts.standins.encoder_gflop_per_patch == 0.8 and opts.arms == ("eager", "deferred")
    custom = ServeOptions(image_format="png", unique_images=3, arms=("deferred",))
    assert (custom.image_format, custom.unique_images, custom.arms) == ("png", 3, ("deferred",))
