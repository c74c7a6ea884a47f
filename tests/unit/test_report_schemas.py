"""Every committed report (``report.json`` or ``report.json.gz``) validates against the
JSON Schema of its kind (shipped in ``kimi_bench/schemas``), and the shipped files are
what the code generates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimi_bench.schemas import report_schema_path, validate_report
from kimi_bench.schemas.report import REPORT_SCHEMAS
from tests.committed import committed_reports, raw_report

ROOT = Path(__file__).resolve().parents[2] / "reports"
# reports/runs/ is where local runs land (git-ignored): never part of the test set, so the
# number of tests does not depend on what was run on this machine before
COMMITTED = committed_reports()


def test_there_are_committed_reports_of_every_measured_kind():
    kinds = {raw_report(p)["kind"] for p in COMMITTED}
    assert {"parity", "micro", "serve-ab"} <= kinds


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_report_validates(path: Path):
    validate_report(raw_report(path))


def test_shipped_schemas_are_current():
    for kind, schema in REPORT_SCHEMAS.items():
        assert json.loads(report_schema_path(kind).read_text()) == schema, kind


def test_a_string_number_is_refused():
    import jsonschema

    path = next(p for p in COMMITTED if "micro" in str(p))
    report = raw_report(path)
    report["summary"]["speedup_median"] = "9.0"
    with pytest.raises(jsonschema.ValidationError):
        validate_report(report)
