"""serve-ab's capacity search (issue 43): the bisection brackets the highest rate meeting
the SLOs to the stated resolution, says when the capacity lies outside the range tried,
and reports each arm's gain over the baseline arm."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kimi_bench.bench.serve_capacity import ArmCapacity, CapacitySearch, Probe, capacity_notes
from kimi_bench.options import ServeOptions
from kimi_bench.results.serve_breakdown import keep_up


def _search(**kw: object) -> CapacitySearch:
    opts = ServeOptions(capacity=True, goodput=("ttft:500",), **kw)
    return CapacitySearch(opts)


@pytest.mark.parametrize("true_capacity", [0.7, 3.3, 5.0, 11.9, 63.0])
def test_the_bracket_holds_the_capacity_within_the_resolution(true_capacity: float) -> None:
    search = _search(capacity_min_rate=0.5, capacity_max_rate=64, capacity_resolution=0.1)
    found = ArmCapacity()
    tried: list[float] = []

    def attempt(rate: float) -> bool:
        tried.append(rate)
        return rate <= true_capacity

    search._bisect(found, attempt)
    assert found.status == "found" and found.low is not None and found.high is not None
    assert found.low <= true_capacity < found.high
    assert found.high - found.low <= 0.1 * found.high
    assert len(tried) == len(set(tried)) <= 12  # each rate once, a bisection's count


def test_a_capacity_outside_the_range_is_said_so() -> None:
    search = _search(capacity_min_rate=1, capacity_max_rate=8)
    below, above = ArmCapacity(), ArmCapacity()
    search._bisect(below, lambda rate: False)
    search._bisect(above, lambda rate: True)
    assert (below.low, below.high, below.status) == (None, 1, "below the lowest rate tried")
    assert (above.low, above.high) == (8, None)
    search.arms = {"eager": below, "deferred": above}
    notes = " ".join(capacity_notes(search.doc()))
    assert "capacity eager: below 1 req/s" in notes and "at least 8 req/s" in notes


def test_the_gain_is_each_arm_over_eager() -> None:
    search = _search()
    search.arms = {"eager": ArmCapacity(low=2.0, high=2.2),
                   "deferred": ArmCapacity(low=5.0, high=5.5)}  # fmt: skip
    doc = search.doc()
    assert doc["baseline"] == "eager"
    assert doc["gain_pct_vs_baseline"] == {"deferred": pytest.approx(150.0)}
    assert "capacity gain deferred vs eager: +150.0%" in capacity_notes(doc)


def test_capacity_needs_slos() -> None:
    with pytest.raises(ValueError, match="--goodput"):
        ServeOptions(capacity=True)


def test_keep_up_is_one_when_first_tokens_keep_pace_whatever_the_latency() -> None:
    arrivals = [0.0, 0.5, 1.0, 1.5, 2.0]
    assert keep_up([(a, a + 3.0) for a in arrivals]) == pytest.approx(1.0)  # slow but steady
    queued = [(a, 0.2 + 1.0 * i) for i, a in enumerate(arrivals)]  # one a second, 2 arrive
    assert keep_up(queued) == pytest.approx(0.5)
    assert keep_up([(0.0, 1.0), (0.0, 2.0), (0.0, 3.0)]) is None  # all at once: rate inf
    assert keep_up([(0.0, 1.0), (1.0, 2.0)]) is None  # too few to say


def test_each_probe_is_judged_before_the_partial_report_is_written() -> None:
    """``after`` (serve-ab writes its partial report there) sees every probe so far judged,
    so a run killed between two probes loses none of them."""
    search = _search(capacity_min_rate=1, capacity_max_rate=8, capacity_resolution=0.2)
    search.judge = lambda run, rate: Probe(rate, rate, 1.0, 1, 1, 1, rate <= 3)  # type: ignore[method-assign]
    probed: list[float] = []
    seen: list[list[float]] = []

    def probe(arm: object, rate: float, index: int) -> object:
        probed.append(rate)
        return object()

    def after() -> None:
        seen.append([p["offered_req_per_s"] for p in search.doc()["arms"]["eager"]["probes"]])

    search([SimpleNamespace(name="eager")], probe, after)  # type: ignore[list-item,arg-type]
    assert seen == [probed[: i + 1] for i in range(len(probed))] and len(probed) >= 3
    found = search.arms["eager"]
    assert found.low is not None and found.high is not None and found.low <= 3 < found.high
