"""A micro report is read once for all its tables, its figures and its verdict
(``tables_micro.micro_of``), and read anew once it has changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kimi_bench.report import tables_micro
from kimi_bench.report.figures_micro import Span, micro_timeline
from kimi_bench.report.model import load_report
from kimi_bench.report.tables_micro import micro_of
from kimi_bench.report.view import view_of

MICRO = Path(__file__).resolve().parents[2] / "reports" / "examples" / "cpu-run" / "micro"


def test_one_report_is_derived_once_for_its_tables_verdict_and_figures(monkeypatch) -> None:
    calls = []
    real = tables_micro.derive_micro
    monkeypatch.setattr(tables_micro, "derive_micro", lambda raw: calls.append(1) or real(raw))
    rep = load_report(MICRO).to_dict()
    view = view_of(rep)
    stats = micro_of(rep).derived
    assert stats is not None and len(calls) == 1
    assert [micro_timeline(micro_of(view.data), arm)[0] for arm in stats.arms]
    assert len(calls) == 1 and micro_of(rep).derived is stats
    other = load_report(MICRO).to_dict()  # equal content, another report: its own reading
    assert micro_of(other) is not micro_of(rep) and len(calls) == 1
    assert micro_of(other).derived is not stats and len(calls) == 2


def copies(rep: dict[str, Any]) -> list[dict[str, Any]]:
    return next(t.rows for t in view_of(rep).tables if t.key == "micro.copies")


def test_a_report_changed_after_rendering_is_read_anew() -> None:
    rep = load_report(MICRO).to_dict()
    first = micro_of(rep)
    assert copies(rep)[0]["op"] != "edited"
    arm = next(iter(rep["arms"]))
    rep["arms"][arm]["copies"][0]["op"] = "edited"  # in place, deep inside the report
    assert micro_of(rep) is not first
    assert copies(rep)[0]["op"] == "edited"
    spans = [{"stage": "take_copy", "start_ms": 0.0, "end_ms": 1.5}]
    rep["timeline"] = {arm: {"ranks": [{"rank": 3, "spans": spans}]}}
    lanes, per_rank = micro_timeline(micro_of(rep), arm)
    assert per_rank and lanes == [Span("rank 3", "take_copy", 0.0, 1.5)]


def test_a_report_that_is_not_plain_data_is_read_without_holding_it() -> None:
    rep = load_report(MICRO).to_dict() | {"odd": object()}
    assert micro_of(rep) is not micro_of(rep)
    assert micro_of(rep).derived is not None


@pytest.mark.parametrize("edit", ["", "stage_ms"])
def test_records_that_do_not_check_leave_no_derived_figures(edit: str) -> None:
    rep = load_report(MICRO).to_dict()
    arm = next(iter(rep["repeats"]))
    if edit:
        rep["repeats"][arm][0][edit] = None  # a repeat without its stages
    assert (micro_of(rep).derived is None) == bool(edit)
