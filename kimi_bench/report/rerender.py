"""``kimi-bench render``: the figures, ``report.md`` and the HTML page written again next
to every saved ``report.json`` under a folder, from the report's data (nothing is
measured again). Committed reports keep their data (report.json) and report.md; this makes
the rest on demand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kimi_bench.report.figbase import RenderedFigure
from kimi_bench.report.figures import figures_png, find_reports
from kimi_bench.report.html import write_html
from kimi_bench.report.model import load_report
from kimi_bench.report.view import View, view_of
from kimi_bench.report.writers import atomic_write_text, render_markdown


def _title(view: View) -> str | None:
    """The heading the writer gave the report's report.md (None: the default one)."""
    if view.typed.kind == "project":
        return "kimi-bench projection"
    if view.typed.config.imported:
        return "imported serve-ab"
    return None


@dataclass(frozen=True)
class Rerendered:
    report_path: Path
    report: View
    figures: list[Path]
    html: Path | None
    rendered: list[RenderedFigure]
    markdown: Path | None = None


def render_tree(root: str | Path, *, html: bool = True) -> list[Rerendered]:
    """Re-render the figures, ``report.md`` and (unless ``html`` is False) ``report.html``
    next to every ``report.json`` under ``root``. Raises ``ReportError`` for a file that is
    not a report."""
    done = []
    for p in find_reports(root):
        view = view_of(load_report(p))
        figs = figures_png(view.data)
        paths = [f.save(p.parent) for f in figs]
        md = atomic_write_text(p.parent / "report.md", render_markdown(view, _title(view)))
        page = None
        if html:
            title = f"kimi-bench {view.typed.kind}"
            page = write_html([view], p.parent / "report.html", title=title, figures=[figs])
        done.append(Rerendered(p, view, paths, page, figs, md))
    return done
