"""The emitters write ``report.json`` from the same view as every other file: with a view
made before the write (as ``serve-ab`` makes it for the terminal too) or by the emitter,
the file holds exactly ``Report.to_dict()`` with ``final`` as the write set it."""

import json
from pathlib import Path

import pytest

from kimi_bench.report.emit import emit_micro, emit_parity, emit_serve
from kimi_bench.report.view import view_of
from tests import ci_reports

pytestmark = pytest.mark.slow  # real micro and serve-ab processes

SERVED = {"eager": [10.0, 11.0, 12.0], "deferred": [9.0, 9.5, 10.0]}  # TTFTs (ms) per arm


@pytest.mark.parametrize("given_view", [True, False], ids=["view-made-before", "view-made-here"])
def test_report_json_is_the_reports_dict_with_final(tmp_path: Path, given_view: bool) -> None:
    for name, report, emit in (
        (
            "serve",
            ci_reports.serve({"eager": [10.0, 11.0, 12.0], "deferred": [9.0, 9.5, 10.0]}),
            emit_serve,
        ),
        ("micro", ci_reports.micro([10.0, 11.0, 12.0, 10.5]), emit_micro),
        ("parity", ci_reports.parity(), emit_parity),
    ):
        view = view_of(report) if given_view else None
        out = tmp_path / f"{name}-{given_view}"
        files = emit(report, out, view=view)
        assert files[0] == out / "report.json"
        written = (out / "report.json").read_text()
        assert written == json.dumps(report.to_dict(), indent=1) + "\n"
        assert json.loads(written)["final"] is True


def test_a_partial_write_says_so(tmp_path: Path) -> None:
    report = ci_reports.serve(SERVED)
    emit_serve(report, tmp_path, figures=False, final=False, view=view_of(report))
    assert json.loads((tmp_path / "report.json").read_text())["final"] is False
