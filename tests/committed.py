"""The checkout's committed reports (under ``reports/``; local runs under ``reports/runs/``
are not committed), found and read as kimi-bench finds them: ``report.json`` or, for the
large ones, ``report.json.gz`` (``kimi_bench/report/files.py``, scripts/pack-reports.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kimi_bench.report.files import REPORT_NAMES, one_per_folder, read_raw

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
RUNS = REPORTS / "runs"


def committed_reports() -> list[Path]:
    """Every committed report file, one per folder, sorted."""
    return one_per_folder(
        p for name in REPORT_NAMES for p in REPORTS.rglob(name) if not p.is_relative_to(RUNS)
    )


def raw_report(path: Path) -> Any:
    """The JSON a report file (or a report folder's file) holds, as written: not
    migrated, not validated."""
    return read_raw(path)
