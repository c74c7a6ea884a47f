"""kimi_bench.results.serve: serve-ab's figures derived once from its request rows, and
what the writer, the read check and the gate make of them (one derive, every reader)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from kimi_bench.ci.evidence_rows import evidence
from kimi_bench.ci.metrics import metric_samples
from kimi_bench.ci.rules import RateRules
from kimi_bench.ci.serving_rules import serving_rules
from kimi_bench.report.agree_rows import disagreement
from kimi_bench.report.model import Report
from kimi_bench.report.schema import parse_report
from kimi_bench.results import ResultError
from kimi_bench.results.serve import COMPARED, LIMITS, ServeRaw, StatedComparison, derive_serve
from kimi_bench.results.serve_rows import readable_requests, serve_requests
from tests.committed import REPORTS, raw_report


def _row(arm: str, rid: int, ttft: float | None, **kw: Any) -> dict[str, Any]:
    return {"rate": "4", "arm": arm, "repeat": 0, "rid": rid, "error": None, "status": 200,
            "ttft_ms": ttft, "images": 1, "pixels": 1_000_000} | kw  # fmt: skip


ROWS = [
    # eager: three served requests with two gaps each, one failed; its repeat ends at 2 s
    _row(
        "eager",
        0,
        100.0,
        itl_ms=[10.0, 20.0],
        e2e_ms=130.0,
        tpot_ms=15.0,
        output_tokens=3,
        end_s=1.0,
    ),
    _row(
        "eager",
        1,
        200.0,
        itl_ms=[30.0, 40.0],
        e2e_ms=270.0,
        tpot_ms=35.0,
        output_tokens=3,
        end_s=2.0,
    ),
    _row(
        "eager",
        2,
        300.0,
        itl_ms=[50.0, 60.0],
        e2e_ms=410.0,
        tpot_ms=55.0,
        output_tokens=3,
        end_s=1.5,
    ),
    _row("eager", 3, None, error="HTTP 500", status=500, end_s=0.5),
    # deferred: two requests of one forward batch (one unit), one alone
    _row("deferred", 0, 150.0, batch_id=7, e2e_ms=150.0, output_tokens=1, end_s=1.0),
    _row("deferred", 1, 150.0, batch_id=7, e2e_ms=150.0, output_tokens=1, end_s=1.0),
    _row("deferred", 2, 250.0, batch_id=8, e2e_ms=250.0, output_tokens=1, end_s=1.0),
]


def _derived(slo: dict[str, float] | None = None) -> Any:
    raw = ServeRaw(tuple(serve_requests(ROWS)), slo or {}, ("eager", "deferred"), "eager")
    return derive_serve(raw)


def test_rows_give_each_serving_figure_once() -> None:
    d = _derived({"ttft": 250.0, "tpot": 30.0})
    eager = d.cell("4", "eager")
    assert eager.completed == 3 and eager.samples("ttft") == [100.0, 200.0, 300.0]
    assert eager.stat("ttft", "median") == 200.0 and eager.stat("ttft", "mean") == 200.0
    assert eager.stat("itl", "p90") == pytest.approx(np.percentile([10, 20, 30, 40, 50, 60], 90))
    # TPOT = (E2E - TTFT) / (tokens - 1): 15, 35, 55; request 1's 35 > 30 misses the SLO
    assert [r.own_tpot for r in eager.served] == [r.tpot_ms for r in eager.served]
    assert eager.good_requests == 1
    # per repeat over its duration (the last response's end, 2 s): 9 tokens, 3 images
    assert eager.throughput("output_tokens_per_s") == 4.5
    assert eager.throughput("megapixels_per_s") == 1.5
    assert eager.throughput("goodput_req_per_s") == 0.5
    deferred = d.cell("4", "deferred")
    assert (
        deferred.measurement("ttft").n_units == 2 and eager.measurement("itl").n_units == 3
    )  # one batch: one unit
    assert deferred.samples("itl") == [] and deferred.stat("tpot", "median") is None
    point = d.point("4", "deferred", COMPARED[0])  # median TTFT, deferred vs eager
    assert (point.a_value, point.b_value, point.delta_pct) == (200.0, 150.0, -25.0)
    assert d.point("4", "deferred", COMPARED[2]) is None  # no ITL on one side
    assert LIMITS["max_p99_ttft_ms"].value(eager) == pytest.approx(
        np.percentile(eager.samples("ttft"), 99)
    )
    assert d.cell("9", "eager").completed == 0  # a rate with no rows: an empty cell


def test_rows_are_typed_and_a_bad_one_is_named() -> None:
    bad = [*ROWS[:2], {**ROWS[2], "output_tokens": "three"}]
    with pytest.raises(ResultError, match=r"requests\[2\]\.output_tokens"):
        serve_requests(bad)
    assert len(readable_requests(bad)) == 2  # a page draws what it can


def _report(rel: str) -> dict[str, Any]:
    return raw_report(REPORTS / rel)


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("results[0].ttft_p90_ms", lambda r: r["results"][0].update(ttft_p90_ms=1.0)),
        ("results[0].completed", lambda r: r["results"][0].update(completed=3)),
        (
            "ab.4.deferred.median_ttft.b_value",
            lambda r: r["ab"]["4"]["deferred"]["median_ttft"].update(b_value=1.0),
        ),
    ],
)
def test_an_edited_figure_is_refused_on_read(where: str, edit: Any) -> None:
    raw = _report("examples/cpu-run/serve-ab/report.json")
    assert disagreement(parse_report(raw)) is None
    edited = copy.deepcopy(raw)
    edit(edited)
    assert where in (disagreement(parse_report(edited)) or "")


def test_the_gate_reads_the_same_figures() -> None:
    raw = _report("examples/cpu-run/serve-ab/report.json")
    rep = Report.from_dict(raw)
    d = derive_serve(ServeRaw(tuple(serve_requests(raw["requests"])), {}, (), "eager"))
    ttfts = d.cell("4", "deferred").samples("ttft")
    assert metric_samples(rep, "serve_ab.4.deferred.ttft_ms") == ttfts
    (res,) = serving_rules(evidence(rep), "4", ["deferred"], RateRules(max_p99_ttft_ms=1e7))
    assert res.measured == pytest.approx(np.percentile(ttfts, 99)) and not res.failed
    ab = evidence(rep).serve.ab["4"]["deferred"]["median_ttft"]
    assert ab.b_value == pytest.approx(np.percentile(ttfts, 50))
    assert raw["ab"]["4"]["deferred"]["median_ttft"]["b_value"] == pytest.approx(ab.b_value)


def test_a_stated_comparison_reads_typed_and_a_hostile_one_reads_empty() -> None:
    raw = _report("examples/cpu-run/serve-ab/report.json")
    med = StatedComparison.read(raw["ab"]["4"]["deferred"]["median_ttft"])
    assert (med.a_label, med.b_label) == ("eager", "deferred") and med.interval is not None
    assert med.delta_pct == raw["ab"]["4"]["deferred"]["median_ttft"]["delta_pct"]
    assert StatedComparison.read({"delta_pct": "big"}).delta_pct is None
    assert StatedComparison.read(None) == StatedComparison()
