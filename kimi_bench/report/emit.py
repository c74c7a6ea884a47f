"""Write a scenario's report folder: one function per kind, shared by the commands and by
``kimi-bench run``. Returns the files written (figures are skipped without matplotlib).

Every report.json carries ``final``: true only when written at the end of its run; the
partial reports a long run writes as it goes say ``final: false``, so a crash leaves a
report that says it is not the whole run (the gate fails it)."""

from __future__ import annotations

from pathlib import Path

from kimi_bench.report.figures import figures_png
from kimi_bench.report.html import write_html
from kimi_bench.report.model import Report
from kimi_bench.report.writers import write_csv, write_json, write_markdown


def _figures_and_page(report: Report, out: Path, figures: bool = True) -> list[Path]:
    """The kind's figures as PNGs and ``report.html`` with the same figures embedded
    (``figures=False``: the page only, for partial writes during a run)."""
    data = report.to_dict()
    figs = figures_png(data) if figures else []
    paths = [f.save(out) for f in figs]
    title = f"kimi-bench {report.kind}"
    return [*paths, write_html([data], out / "report.html", title=title, figures=[figs])]


def _json_last(report: Report, out: Path, files: list[Path]) -> list[Path]:
    """``report.json`` written after every other file (each renamed into place when
    complete): a folder with a report.json holds the whole report. Listed first."""
    return [write_json(report, out / "report.json"), *files]


def emit_parity(report: Report, out: Path) -> list[Path]:
    report.data["final"] = True
    files = [
        write_markdown(report, out / "report.md"),
        write_csv(report.results, out / "parity.csv"),
        *_figures_and_page(report, out),
    ]
    return _json_last(report, out, files)


def emit_micro(report: Report, out: Path) -> list[Path]:
    report.data["final"] = True
    files = [
        write_markdown(report, out / "report.md"),
        write_csv(report.results, out / "stages.csv"),
        *_figures_and_page(report, out),
    ]
    return _json_last(report, out, files)


def emit_serve(
    report: Report, out: Path, *, figures: bool = True, final: bool = True
) -> list[Path]:
    """``final=False``: a partial write during the run (the page only, no figures)."""
    report.data["final"] = final
    files = [
        write_markdown(report, out / "report.md"),
        write_csv(report.data["requests"], out / "requests.csv"),
        *_figures_and_page(report, out, figures),
    ]
    return _json_last(report, out, files)
