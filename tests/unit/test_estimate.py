"""The estimates printed before a run: they grow with the work asked for, and a busy host
(load average above its CPUs) scales them, saying so."""

from __future__ import annotations

import math

import pytest

from kimi_bench.bench import estimate
from kimi_bench.bench.scenario import load_scenario
from kimi_bench.options import MicroOptions, ServeOptions, resolve_defaults


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})


def test_estimates_grow_with_the_work(quiet: None):
    m, _ = resolve_defaults(MicroOptions(synthetic="2x640x480"), "micro", "cpu")
    more = m.model_copy(update={"repeats": m.repeats * 4})
    bigger = m.model_copy(update={"synthetic": "2x1920x1080"})
    assert estimate.micro_s(more) > estimate.micro_s(m) and estimate.micro_s(
        bigger
    ) > estimate.micro_s(m)
    s, _ = resolve_defaults(ServeOptions(rates="2,inf", requests=16), "serve_ab", "cpu")
    assert estimate.serve_s(s) >= 16 / 2  # at least the arrival span of the finite rate
    slow = s.model_copy(update={"rates": (0.5, math.inf)})
    assert estimate.serve_s(slow) - estimate.serve_s(s) == pytest.approx(2 * (32 - 8))
    parts = estimate.run_parts(load_scenario("default"))
    assert [p for p, _ in parts] == ["parity", "micro", "serve-ab", "gate and index"]
    assert all(sec > 0 for _, sec in parts)
    assert estimate.busy_note(3) == ""


def test_a_busy_host_scales_the_estimate_and_says_so(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))
    m, _ = resolve_defaults(MicroOptions(), "micro", "cpu")
    quiet = estimate.micro_s(m)
    monkeypatch.setattr("os.getloadavg", lambda: (9.0, 9.0, 9.0))
    slower = 4.5**estimate.CONTENTION_EXPONENT
    assert estimate.contention(3) == pytest.approx(slower)
    assert estimate.micro_s(m) == pytest.approx(quiet * slower)
    assert f"host busy: load 9.0 on 2 CPUs, x{slower:.1f}" in estimate.busy_note(3)
    monkeypatch.setattr("os.getloadavg", lambda: (1.5, 1.5, 1.5))  # below the CPUs: quiet
    assert estimate.micro_s(m) == pytest.approx(quiet)
