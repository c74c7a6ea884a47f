"""The read check (``report.agree*``) reads the report parsed once into its kind's model:
raw records that are not numbers are refused by the parse with the field named, an older
layout is checked as the current one, and an edited figure is still refused on read."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kimi_bench.report.agree_rows import disagreement
from kimi_bench.report.kinds import MicroReport, RepeatRecord, ServeReport
from kimi_bench.report.model import ReportError, check_envelope
from kimi_bench.report.schema import parse_report
from tests.committed import REPORTS, raw_report

MICRO = REPORTS / "checks/typed-micro-records/f7c5b37/report.json"
SERVE = REPORTS / "examples/cpu-run/serve-ab/report.json"
Edit = Callable[[dict[str, Any]], object]


def _refusal(path: Any, edit: Edit) -> str:
    raw = copy.deepcopy(raw_report(path))
    edit(raw)
    with pytest.raises(ReportError) as exc:
        check_envelope(raw, "r")
    return str(exc.value)


def test_the_records_are_typed_by_the_report_model() -> None:
    typed = parse_report(raw_report(MICRO))
    assert isinstance(typed, MicroReport) and typed.repeats
    rec = typed.repeats["deferred"][0]
    assert isinstance(rec, RepeatRecord) and rec.total_ms > 0 and "timeline" in rec.model_fields_set
    assert disagreement(typed) is None
    serve = parse_report(raw_report(SERVE))
    assert isinstance(serve, ServeReport) and serve.requests[0].served in (True, False)
    assert disagreement(serve) is None


@pytest.mark.parametrize(
    ("path", "edit", "says"),
    [
        (MICRO, lambda r: r["repeats"]["deferred"][0].update(total_ms="5"),
         "field repeats.deferred[0].total_ms"),
        (MICRO, lambda r: r["repeats"]["deferred"][0]["stage_ms"].update(producer=-1.0),
         "field repeats.deferred[0].stage_ms.producer"),
        (MICRO, lambda r: r["control_repeats"]["eager"][0].update(total_ms=1.0),
         "control_repeats.eager[0].total_ms 1 is not the sum of its stages"),
        (MICRO, lambda r: r["repeats"]["eager"].append(dict(r["repeats"]["eager"][1])),
         "repeats.eager[3] repeats repeats.eager[1] (iteration 1)"),
        (MICRO, lambda r: r["arms"]["deferred"]["total_ms"].update(p90=1.0),
         "arms.deferred.total_ms.p90 says 1 but the raw data gives"),
        (SERVE, lambda r: r["requests"][0].update(status="200"), "field requests[0].status"),
        (SERVE, lambda r: r["requests"][0].update(producer_ms=1e999),
         "requests[0].producer_ms is not finite"),
        (SERVE, lambda r: r["ab"]["4"]["deferred"]["median_ttft"].update(a_value=1.0),
         "ab.4.deferred.median_ttft.a_value says 1 but the raw data gives"),
    ],
)  # fmt: skip
def test_a_bad_record_or_an_edited_figure_is_refused_naming_it(
    path: Any, edit: Edit, says: str
) -> None:
    assert says in _refusal(path, edit)


def test_an_older_layout_is_checked_as_the_current_one() -> None:
    """Stage samples and summaries under their older names: the migrated report is what
    the check compares, so an edit there is still refused."""

    def older(raw: dict[str, Any]) -> None:
        for st in raw["arms"]["deferred"]["stages"].values():
            st["measurement"] = st.pop("summary_ms")
            st["samples"] = st.pop("samples_ms")

    raw = copy.deepcopy(raw_report(MICRO))
    older(raw)
    check_envelope(raw, "r")  # reads back
    stage = next(iter(raw["arms"]["deferred"]["stages"].values()))
    stage["measurement"]["median"] = 1e6
    with pytest.raises(ReportError, match=r"summary_ms\.median says 1e\+06"):
        check_envelope(raw, "r")
