"""A report as every format shows it, made once from its data: the verdict lines
(``verdicts``), the notes a reader sees (``access.reader_notes``) and its tables
(``tables``). ``report.md``, the HTML page and the terminal read these, so a command that
writes a report and prints it derives them one time, and every format says the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kimi_bench.report import access, verdicts
from kimi_bench.report.kinds import Envelope
from kimi_bench.report.model import Report
from kimi_bench.report.schema import parse_report
from kimi_bench.report.table import Rendered, Table, render
from kimi_bench.report.tables import tables


@dataclass(frozen=True)
class View:
    data: dict[str, Any]  # ``Report.to_dict()``
    typed: Envelope  # ``data`` as its kind's model
    lines: list[verdicts.Line]
    notes: list[str]
    tables: list[Table]
    rendered: list[Rendered]  # each table with its cells and Markdown written


def view_of(report: Report | dict[str, Any]) -> View:
    """The view of a report (or of its ``to_dict()``)."""
    data = report.to_dict() if isinstance(report, Report) else report
    typed = parse_report(data)
    shown = tables(typed, data)
    rendered = [render(t) for t in shown]
    lines = verdicts.lines(data, typed)
    return View(data, typed, lines, access.reader_notes(typed), shown, rendered)
