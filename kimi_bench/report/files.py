"""Where a report's data lives on disk: ``report.json``, or ``report.json.gz`` (the same
JSON, gzip-compressed: how the checkout's committed reports under ``reports/`` are kept,
``scripts/pack-reports.py``). Every reader takes either: a folder holding one of them is a
report folder, and a path naming a ``report.json`` that is missing reads its ``.gz``
sibling, so a path written before the reports were compressed still works. A folder
holding both is read from ``report.json``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPORT_JSON = "report.json"
REPORT_GZ = REPORT_JSON + ".gz"
# The names of a report's data file, the one read first when a folder holds both first.
REPORT_NAMES = (REPORT_JSON, REPORT_GZ)


def is_gzipped(path: Path) -> bool:
    """Whether ``path`` names gzip-compressed data (by its name)."""
    return path.name.endswith(".gz")


def report_in(folder: Path) -> Path | None:
    """The report file ``folder`` holds (``report.json``, else ``report.json.gz``), or None."""
    return next((folder / n for n in REPORT_NAMES if (folder / n).is_file()), None)


def report_file(path: Path) -> Path:
    """The file a report path names: for a folder, the report it holds (``report.json``
    when it holds none, so that the error names the usual file); for a missing
    ``….json`` whose ``….json.gz`` exists, that one; else ``path`` itself."""
    if path.is_dir():
        return report_in(path) or path / REPORT_JSON
    if path.suffix == ".json" and not path.exists():
        packed = path.with_name(path.name + ".gz")
        if packed.is_file():
            return packed
    return path


def one_per_folder(files: Iterable[Path]) -> list[Path]:
    """Report files found by a search, one per folder (``report.json`` over its ``.gz``),
    sorted as the folders are."""
    found = set(files)
    return sorted(
        (p for p in found if not (p.name == REPORT_GZ and p.with_name(REPORT_JSON) in found)),
        key=lambda p: p.with_name(REPORT_JSON),
    )


def read_raw(path: Path) -> Any:
    """The JSON a report file (or a report folder's file) holds, as written: not migrated,
    not validated, no size limits (the checkout's own reports, for tests and scripts;
    commands read reports through ``report.model.load_report``)."""
    p = report_file(path)
    data = p.read_bytes()
    return json.loads(gzip.decompress(data) if is_gzipped(p) else data)
