"""The typed report models (``report.kinds``) and the one migration of older layouts
(``report.migrate``): committed reports are current and pass unchanged, older layouts
read as the current one, and the models refuse what the gate must not read while
letting new fields through."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, cast

import pytest

from kimi_bench.report import access
from kimi_bench.report.figures_micro import stage_stats
from kimi_bench.report.kinds import MODELS, model_for
from kimi_bench.report.migrate import migrate
from kimi_bench.report.model import Report
from kimi_bench.report.schema import parse_report, report_problem
from kimi_bench.report.tables_micro import micro_of
from tests.committed import committed_reports, raw_report

ROOT = Path(__file__).resolve().parents[2] / "reports"
COMMITTED = committed_reports()
MICRO = ROOT / "examples" / "cpu-run" / "micro" / "report.json"
SERVE = ROOT / "examples" / "cpu-run" / "serve-ab" / "report.json"


def read(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], raw_report(path))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_reports_are_current_and_valid(path: Path) -> None:
    raw = read(path)
    assert migrate(copy.deepcopy(raw)) == raw
    assert report_problem(raw) is None
    model_for(raw).model_validate(raw)


def test_every_typed_kind_has_a_model() -> None:
    assert set(MODELS) == {"parity", "micro", "serve-ab", "project"}


def _older_micro() -> dict[str, Any]:
    raw = read(MICRO)
    for block in raw["arms"].values():
        for st in block["stages"].values():
            st["measurement"] = st.pop("summary_ms")
            st["samples"] = st.pop("samples_ms")
    raw.pop("floor_ms")
    env, cfg = raw["environment"], raw["config"]
    cfg["preset"] = env.pop("preset")
    cfg["carrier"] = cfg.pop("transport")
    return raw


def test_an_older_micro_layout_reads_as_the_current_one() -> None:
    current, older = read(MICRO), _older_micro()
    assert report_problem(older) is None
    migrated = Report.from_dict(older).to_dict()
    assert stage_stats(micro_of(migrated).derived) == stage_stats(micro_of(current).derived)
    assert access.caption(parse_report(migrated)) == access.caption(parse_report(current))
    assert migrated["floor_ms"] == current["floor_ms"]
    assert migrated["config"]["transport"] == current["config"]["transport"]
    assert "floor_ms" not in older  # the file's dict is not changed


def test_an_older_serve_layout_gets_its_rates_and_arms() -> None:
    raw = read(SERVE)
    older = copy.deepcopy(raw)
    del older["summary"]["rates"], older["config"]["arms"]
    migrated = Report.from_dict(older).to_dict()
    assert access.serve_rates(migrated) == access.serve_rates(raw)
    assert access.serve_arms(migrated) == access.serve_arms(raw)
    assert access.serve_rates({"summary": {"rates": [2.0, math.inf, None]}}) == ["2", "inf", "inf"]


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        (lambda r: r["summary"].update(speedup_median="9.0"), "summary.speedup_median", "'9.0'"),
        (lambda r: r["summary"].update(floor_ms=-1.0), "summary.floor_ms", "minimum of 0"),
        (lambda r: r["summary"].update(bytes_ratio=math.inf), "summary.bytes_ratio", "finite"),
        (lambda r: r["summary"].update(repeats_completed=True), "summary.repeats_completed", ""),
        (lambda r: r["arms"]["eager"].update(stages=[]), "arms.eager.stages", ""),
        (lambda r: r.pop("arms"), "arms", "required"),
    ],
)
def test_the_micro_model_refuses_naming_the_field(edit: Any, field: str, words: str) -> None:
    raw = read(MICRO)
    edit(raw)
    problem = report_problem(raw) or ""
    assert problem.startswith(f"field {field}:") and words in problem


def test_fields_this_version_does_not_read_are_allowed() -> None:
    micro, serve = read(MICRO), read(SERVE)
    micro["transfer_trace"] = {"payload_ms": {"samples": [1.0]}}
    micro["arms"]["deferred-decode"] = copy.deepcopy(micro["arms"]["deferred"])
    micro["summary"]["payload_cost_ms"] = 0.5
    serve["requests"][0]["client_overhead_ms"] = 0.1
    serve["summary"]["lateness_ms"] = {"p90": 2.0}
    assert report_problem(micro) is None and report_problem(serve) is None


def test_earlier_serve_ab_layout_is_checked_by_its_own_fields() -> None:
    raw = read(SERVE) | {"ab": {"inf": {"median_ttft": {"delta": -0.2, "ci95": [-0.3, -0.1]}}}}
    assert report_problem(raw) is None
    raw["ab"]["inf"]["median_ttft"]["delta"] = "-0.2"
    assert (report_problem(raw) or "").startswith("field ab.inf.median_ttft.delta:")


def test_the_control_block_is_typed_where_the_payload_figure_reads_it() -> None:
    cost = {"arm_ms": 2.0, "control_ms": 1.0, "payload_ms": 1.0,
            "interval": {"low": 0.5, "high": 1.5, "kind": "ci"}}  # fmt: skip
    raw = read(MICRO) | {
        "control": {
            "rounds": 1, "arms": {}, "payload_speedups": {}, "emulation_only": [],
            "payload": {"deferred": {"stages": {}, "total": cost,
                                     "total_without_emulation": cost}},
            "floor": {"data_floor_ms": 1.0, "control_ms": 1.0, "floor_ms": 2.0},
        }
    }  # fmt: skip
    assert report_problem(raw) is None
    raw["control"]["payload"]["deferred"]["total"] = cost | {"payload_ms": "1"}
    problem = report_problem(raw) or ""
    assert problem.startswith("field control.payload.deferred.total.payload_ms:")


def test_an_arm_that_ran_no_repeat_reads_as_no_samples() -> None:
    """A micro stopped (SIGTERM) before an arm's first repeat writes that arm's
    ``total_ms`` as null; its typed view is a block of no samples, not a broken report."""
    data = copy.deepcopy(read(MICRO))
    arm = next(iter(data["arms"]))
    data["arms"][arm]["total_ms"] = None
    typed = parse_report(data)
    assert typed.arms[arm].total_ms.samples == []
