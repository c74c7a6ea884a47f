"""Write a scenario's report folder: one function per kind, shared by the commands and by
``kimi-bench run``. Returns the files written (figures are skipped without matplotlib).

Every report.json carries ``final``: true only when written at the end of its run; the
partial reports a long run writes as it goes say ``final: false``, so a crash leaves a
report that says it is not the whole run (the gate fails it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kimi_bench.report.figures import figures_png
from kimi_bench.report.html import write_html
from kimi_bench.report.model import Report
from kimi_bench.report.view import View, view_of
from kimi_bench.report.writers import write_csv, write_json_doc, write_markdown


def _emit(
    report: Report, out: Path, csv: tuple[str, list[Any]], view: View | None, figures: bool
) -> list[Path]:
    """The kind's figures as PNGs (``figures=False``: none, for partial writes during a
    run), ``report.html`` with the same figures embedded, ``report.md``, the CSV of
    ``csv`` (name, rows), then ``report.json`` (``report.data["final"]`` set by the
    caller). ``view``: the report's view when the caller made it already."""
    final = report.data["final"]
    view = view or view_of(report)
    figs = figures_png(view.data) if figures else []
    title = f"kimi-bench {view.typed.kind}"
    page = [*(f.save(out) for f in figs),
            write_html([view], out / "report.html", title=title, figures=[figs])]  # fmt: skip
    md = write_markdown(view, out / "report.md")
    table = write_csv(csv[1], out / csv[0])
    # report.json after every other file (each renamed into place when complete): a
    # folder with a report.json holds the whole report. Listed first. Written from the
    # view's data (what every other file shows) with ``final`` as set now.
    doc = {**view.data, "final": final}
    return [write_json_doc(doc, out / "report.json"), md, table, *page]


def emit_parity(report: Report, out: Path, view: View | None = None) -> list[Path]:
    report.data["final"] = True
    return _emit(report, out, ("parity.csv", report.results), view, True)


def emit_micro(report: Report, out: Path, view: View | None = None) -> list[Path]:
    report.data["final"] = True
    return _emit(report, out, ("stages.csv", report.results), view, True)


def emit_serve(
    report: Report,
    out: Path,
    *,
    figures: bool = True,
    final: bool = True,
    view: View | None = None,
) -> list[Path]:
    """``final=False``: a partial write during the run (the page only, no figures)."""
    report.data["final"] = final
    return _emit(report, out, ("requests.csv", report.data["requests"]), view, figures)
