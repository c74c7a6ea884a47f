"""Every table of a report, one function per table, built from ``report.json`` data only.

``tables(report)`` is what the Markdown file, the HTML page and the terminal print: one
list per report, so the three never disagree and a re-rendered committed report shows
what a fresh one does. Each cell carries the JSON pointer of the value it shows
(``table.Table.sources``); a value derived here (a sum, a list of noisy stages) has none.
The kinds' own tables are in ``tables_micro`` and ``tables_serve``.
"""

from __future__ import annotations

from typing import Any

from kimi_bench.report.kinds import (
    Envelope,
    MicroReport,
    ParityReport,
    ProjectReport,
    ProjectValidation,
    ServeReport,
)
from kimi_bench.report.table import Table, generic, pointer
from kimi_bench.report.tables_base import PARITY_COLUMNS, Dict, col, present, rows_table
from kimi_bench.report.tables_micro import micro_of, micro_tables
from kimi_bench.report.tables_serve import Serve, serve_tables

__all__ = ["tables"]


# -------------------------------------------------------------------------- every kind


def summary_table(report: Dict) -> Table:
    """The summary's numbers and words (lists of rows are tables of their own)."""
    table = Table("summary", "Summary", [col("metric"), col("value")])
    for k, v in (report.get("summary") or {}).items():
        if k == "verdict":
            continue
        if isinstance(v, dict):
            for kk, vv in v.items():
                if not isinstance(vv, (dict, list)):
                    table.add(
                        {"metric": f"{k}.{kk}", "value": vv}, {"value": pointer("summary", k, kk)}
                    )
        elif isinstance(v, list):
            if all(not isinstance(x, (dict, list)) for x in v):
                table.add({"metric": k, "value": ", ".join(map(str, v)) or None})
        else:
            table.add({"metric": k, "value": v}, {"value": pointer("summary", k)})
    return table


# ----------------------------------------------------------------------------- project

_CHECKED = ["transport", "ranks", "arm", "calibration_ms", "predicted_ms", "measured_ms"]
_ERRORS = (
    ("validation", "Validation: total error", "totals", [*_CHECKED, "error_pct", "within_target"]),
    ("validation_stages", "Validation: error per stage", "stages",
     [*_CHECKED[:3], "stage", "kind", *_CHECKED[3:], "error_ms", "error_pct", "note"]),
)  # fmt: skip


def project_tables(report: ProjectReport) -> list[Table]:
    """Totals, the validation's errors (with measured reports), the stages, the fitted."""
    val = report.validation or ProjectValidation()
    title = "Projected totals (ms, median) and speedup"
    out = [generic("project.totals", title, report.totals or [], "/totals")]
    for key, title, block, cols in _ERRORS if val.totals else ():
        rows = (val.totals if block == "totals" else val.stages) or []
        out.append(generic(f"project.{key}", title, rows, f"/validation/{block}", cols))
    out.append(project_stages(report))
    out.append(
        generic("project.fitted", "Fitted from the calibration", report.fitted or [], "/fitted")
    )
    for t in out:
        t.columns = [col(c.key) for c in t.columns]
    return out


def project_stages(report: ProjectReport) -> Table:
    """The projected stages pivoted: one row per (carrier, ranks, link, arm)."""
    stages: list[str] = []
    keys: dict[tuple[Any, ...], int] = {}
    table = Table("project.stages", "Projected stages (ms, median)", [])
    for i, r in enumerate(report.results):
        key = (r.transport, r.ranks, r.link_gbps, r.arm)
        if key not in keys:
            keys[key] = len(table.rows)
            table.add(
                {
                    "transport": key[0],
                    "ranks": key[1],
                    "nodes": r.nodes,
                    "link_gbps": key[2],
                    "threads": r.threads_per_process,
                    "arm": key[3],
                }
            )
        k = keys[key]
        table.rows[k][r.stage] = r.predicted_ms
        table.sources[k][str(r.stage)] = pointer("results", i, "predicted_ms")
        if r.stage not in stages:
            stages.append(str(r.stage))
    fixed = ["transport", "ranks", "nodes", "link_gbps", "threads", "arm"]
    table.columns = [col(c) for c in fixed] + [col(s, "num") for s in stages]
    return table


def tables(typed: Envelope, report: Dict) -> list[Table]:
    """The report's tables in the order every format shows them: the summary (as stored,
    free-form), then the kind's own, each kind reading ``report`` (``typed`` as its JSON
    dict) once here; a parity report's rows are shown as stored."""
    out = [summary_table(report)]
    if isinstance(typed, ProjectReport):
        out += project_tables(typed)
    elif isinstance(typed, MicroReport):
        out += micro_tables(micro_of(report))
    elif isinstance(typed, ServeReport):
        out += serve_tables(Serve(typed, report))
    elif isinstance(typed, ParityReport):
        rows = [r for r in report.get("results") or [] if isinstance(r, dict)]
        cols = present(rows, PARITY_COLUMNS)
        out.append(rows_table("parity.inputs", "Per input", rows, "/results", cols))
    return out
