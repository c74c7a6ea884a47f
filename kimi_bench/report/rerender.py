"""``kimi-bench render``: the figures and the HTML page drawn again next to every saved
``report.json`` under a folder, from the report's data (nothing is measured again)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_bench.report.figbase import RenderedFigure
from kimi_bench.report.figures import figures_png, find_reports
from kimi_bench.report.html import write_html
from kimi_bench.report.model import load_report


@dataclass(frozen=True)
class Rerendered:
    report_path: Path
    report: dict[str, Any]
    figures: list[Path]
    html: Path | None
    rendered: list[RenderedFigure]


def render_tree(root: str | Path, *, html: bool = True) -> list[Rerendered]:
    """Re-render the figures (and a ``report.html`` unless ``html`` is False) next to every
    ``report.json`` under ``root``. Raises ``ReportError`` for a file that is not a report."""
    done = []
    for p in find_reports(root):
        rep = load_report(p).to_dict()
        figs = figures_png(rep)
        paths = [f.save(p.parent) for f in figs]
        page = None
        if html:
            title = f"kimi-bench {rep.get('kind')}"
            page = write_html([rep], p.parent / "report.html", title=title, figures=[figs])
        done.append(Rerendered(p, rep, paths, page, figs))
    return done
