"""A serve-ab run stopped by Ctrl-C (issue 46): the requests it never sent, and those the
interrupt cut off in flight, are not failures; the arm it interrupted is not compared
with a complete one; the rates that never ran are not drawn."""

from __future__ import annotations

import math

import pytest
import torch

from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.bench.serve_runs import Placement, ServedRequest, ServeRun
from kimi_bench.infra.limits import SIGINT_REASON
from kimi_bench.options import ServeOptions
from kimi_bench.report import verdicts

CPU = torch.device("cpu")
PLANNED = 12


def _done(i: int, ttft: float) -> ServedRequest:
    sent = 100.0 + 0.05 * i
    return ServedRequest(rid=i, scheduled_s=0.05 * i, t_sent=sent, t_first=sent + ttft / 1e3,
                         ttft_ms=ttft, status=200, facts={"batch_id": i})  # fmt: skip


def _cut(i: int) -> ServedRequest:
    why = "interrupted before the response ended"
    return ServedRequest(
        rid=i, scheduled_s=0.05 * i, t_sent=100.0 + 0.05 * i, error=why, error_kind="cancelled"
    )


def _run(arm: str, rate_index: int, opts: ServeOptions, records: list[ServedRequest],
         error: str | None = None, unsent: int = 0) -> ServeRun:  # fmt: skip
    rate = opts.rates[rate_index]
    label = "inf" if math.isinf(rate) else f"{rate:g}"
    at = Placement(rate, label, 0, rate_index, (0.0,) * PLANNED)
    return ServeRun(arm=arm, at=at, records=records, trace_start=100.0, error=error,
                    unsent=unsent)  # fmt: skip


@pytest.fixture
def interrupted():
    """Rates 4, 2 and 8: rate 4 complete for both arms; at rate 2 eager completes and
    deferred is interrupted after 5 requests (1 cut off in flight, 6 never sent); rate 8
    never runs."""
    opts = ServeOptions(rates="4,2,8", requests=PLANNED, arms=("eager", "deferred"), ranks=2,
                        resolution=(64, 48), device="cpu")  # fmt: skip
    full = [_done(i, 50.0 + i) for i in range(PLANNED)]
    runs = [
        _run("eager", 0, opts, full),
        _run("deferred", 0, opts, [_done(i, 40.0 + i) for i in range(PLANNED)]),
        _run("eager", 1, opts, full),
        _run(
            "deferred",
            1,
            opts,
            [*(_done(i, 30.0) for i in range(5)), _cut(5)],
            error=SIGINT_REASON,
            unsent=6,
        ),
    ]
    return build_serve_report(opts, runs, CPU, SIGINT_REASON, "cpu")


def test_unsent_and_cut_off_requests_are_not_failures(interrupted):
    s = interrupted.summary
    assert s["failed_requests"] == 0
    row = next(r for r in interrupted.results if r["rate"] == "2" and r["arm"] == "deferred")
    assert row["failed"] == 0 and row["completed"] == 5 and row["interrupted"] == 7
    lines = [line.text for line in verdicts.lines(interrupted.to_dict())]
    assert not any("FAILED" in line for line in lines), lines
    assert lines[0].startswith("INCOMPLETE: interrupted by SIGINT")


def test_the_interrupted_arm_is_not_compared(interrupted):
    ab = interrupted.data["ab"]
    assert "2" not in ab  # deferred at rate 2 was cut short: no delta against eager's run
    assert "deferred" in ab["4"]  # the complete rate keeps its comparison
    lines = [line.text for line in verdicts.lines(interrupted.to_dict())]
    assert not any(line.startswith("rate 2:") for line in lines), lines
    assert any("rate 2" in n and "not compared" in n for n in interrupted.notes), interrupted.notes


def test_rates_that_never_ran_are_not_drawn(interrupted):
    pytest.importorskip("matplotlib")
    from kimi_bench.report.figures_serve import ServeFigures, throughput_figure

    fig = throughput_figure(ServeFigures.of(interrupted.to_dict()))
    (ax,) = [a for a in fig.axes if a.get_xticklabels()]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["4 req/s", "2 req/s"], ticks  # rate 8 never ran: no "0 (0%)" bars
    texts = [t.get_text() for t in ax.texts]
    assert not any(t.startswith("0\n") for t in texts), texts


def test_a_dead_arm_still_fails_its_unsent_requests():
    """Not an interrupt: an arm that died leaves its rest unsent, and those are failures."""
    opts = ServeOptions(rates="inf", requests=PLANNED, arms=("eager", "deferred"), ranks=2,
                        resolution=(64, 48), device="cpu")  # fmt: skip
    runs = [
        _run("eager", 0, opts, [_done(i, 50.0) for i in range(PLANNED)]),
        _run(
            "deferred",
            0,
            opts,
            [_done(i, 40.0) for i in range(4)],
            error="5 connection failures in a row",
            unsent=8,
        ),
    ]
    report = build_serve_report(opts, runs, CPU, None, "cpu")
    assert report.summary["failed_requests"] == 8


def _spread(n: int, gap_s: float, ttft: float) -> list[ServedRequest]:
    return [
        ServedRequest(
            rid=i,
            scheduled_s=gap_s * i,
            t_sent=100.0 + gap_s * i,
            t_first=100.0 + gap_s * i + ttft / 1e3,
            ttft_ms=ttft + (i % 3),
            status=200,
            facts={"batch_id": i},
        )
        for i in range(n)
    ]


def test_an_unresolved_answer_says_which_options_would_resolve_it():
    """The default CPU serve-ab (issue 46): the same run three times gave -1.4%, +14.5% and
    -18.8% at rate 2; a difference it cannot resolve says so and names the options."""
    opts = ServeOptions(rates="2", requests=4, arms=("eager", "deferred"), ranks=2,
                        resolution=(64, 48), device="cpu")  # fmt: skip
    runs = [
        _run("eager", 0, opts, _spread(4, 0.5, 50.0)),
        _run("deferred", 0, opts, _spread(4, 0.5, 49.0)),
    ]
    report = build_serve_report(opts, runs, CPU, None, "cpu")
    (hint,) = [n for n in report.notes if n.startswith("NOT RESOLVED")]
    assert "--num-prompts 40 (now 4)" in hint and "--repeats 3 or more (now 1;" in hint


def test_a_saturated_rate_is_named_in_words():
    """Offered 8 req/s, achieved about 5 (the issue's 4.95 of 8): a note says it saturated."""
    opts = ServeOptions(rates="8,2", requests=PLANNED, arms=("eager", "deferred"), ranks=2,
                        resolution=(64, 48), device="cpu")  # fmt: skip
    runs = [
        _run("eager", 0, opts, _spread(PLANNED, 0.2, 50.0)),  # 12 in about 2.25 s
        _run("deferred", 0, opts, _spread(PLANNED, 0.125, 50.0)),  # 12 in 1.425 s: 8.4/s
        _run("eager", 1, opts, _spread(PLANNED, 0.5, 50.0)),  # rate 2 kept up
        _run("deferred", 1, opts, _spread(PLANNED, 0.5, 50.0)),
    ]
    report = build_serve_report(opts, runs, CPU, None, "cpu")
    said = [n for n in report.notes if n.startswith("SATURATED")]
    assert len(said) == 1, report.notes
    assert said[0].startswith("SATURATED: rate 8, eager: achieved 5.") and "of 8 offered" in said[0]
