"""Figures of a report, drawn from its ``report.json`` data only, so committed reports can
be re-rendered by any later kimi-bench.

``render_figures(report, out_dir)`` writes the PNGs of one report; ``figures_png(report)``
returns them in memory (for the HTML page); ``render_tree(root)`` re-renders every
``report.json`` under a folder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kimi_bench.report import figures_micro, figures_parity, figures_project, figures_serve
from kimi_bench.report.figbase import PLOT_HINT, FigureSpec, RenderedFigure, png_bytes, pyplot
from kimi_bench.report.files import REPORT_NAMES, one_per_folder
from kimi_bench.report.kinds import ParityReport
from kimi_bench.report.model import Report
from kimi_bench.report.tables_micro import micro_of

__all__ = [
    "FIGURES",
    "PLOT_HINT",
    "figures_png",
    "find_reports",
    "plot_available",
    "render_figures",
    "saved_figures",
]

FIGURES: dict[str, tuple[FigureSpec[Any], ...]] = {
    "micro": figures_micro.FIGURES,
    "serve-ab": figures_serve.FIGURES,
    "parity": figures_parity.FIGURES,
    "project": figures_project.FIGURES,
}
# What a kind's figures draw from, read once per drawing out of the report's JSON dict.
READ: dict[str, Callable[[dict[str, Any]], object]] = {
    "micro": micro_of,
    "serve-ab": figures_serve.ServeFigures.of,
    "parity": ParityReport.model_validate,
    "project": figures_project.Projection.model_validate,
}


def figure_input(report: Report | dict[str, Any]) -> object:
    """What the figures of a report's kind are built from (``FigureSpec.build``); None for
    a kind without figures."""
    rep = _as_dict(report)
    read = READ.get(str(rep.get("kind")))
    return read(rep) if read else None


def _as_dict(report: Report | dict[str, Any]) -> dict[str, Any]:
    return report.to_dict() if isinstance(report, Report) else report


def plot_available() -> bool:
    return pyplot() is not None


def figures_png(report: Report | dict[str, Any]) -> list[RenderedFigure]:
    """Every figure of the report's kind as PNG bytes; [] without matplotlib or for a kind
    that has no figures (``run``)."""
    rep = _as_dict(report)
    if pyplot() is None:
        return []
    out, data = [], figure_input(rep)
    for spec in FIGURES.get(str(rep.get("kind")), ()):
        fig = spec.build(data)
        out.append(RenderedFigure(spec.stem, spec.title, spec.about, png_bytes(fig)))
    return out


def render_figures(report: Any, out_dir: str | Path) -> list[Path]:
    """Write the report's figures as ``<stem>.png`` under ``out_dir``; returns the paths
    ([] without matplotlib: the caller prints ``PLOT_HINT``)."""
    return [f.save(Path(out_dir)) for f in figures_png(report)]


def saved_figures(report: Any, folder: str | Path) -> list[RenderedFigure]:
    """The report's figures as already written in ``folder`` (``<stem>.png``), without
    drawing them again; figures missing on disk are skipped."""
    rep = _as_dict(report)
    out = []
    for spec in FIGURES.get(str(rep.get("kind")), ()):
        png = Path(folder) / f"{spec.stem}.png"
        if png.is_file():
            out.append(RenderedFigure(spec.stem, spec.title, spec.about, png.read_bytes()))
    return out


def find_reports(root: str | Path) -> list[Path]:
    """``root`` itself when it is a file, else every report file below it (``report.json``,
    or ``report.json.gz`` where the folder holds no ``report.json``; regular files only,
    symlinks are not followed), sorted."""
    base = Path(root)
    if base.is_file():
        return [base]
    found = (p for n in REPORT_NAMES for p in base.rglob(n) if p.is_file() and not p.is_symlink())
    return one_per_folder(found)
