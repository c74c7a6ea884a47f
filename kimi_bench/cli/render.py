"""``kimi-bench render``: figures and the HTML page again, from saved report.json files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kimi_bench.cli.common import say, usage_error, warn


def render(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="report.json files or folders; every report.json below a folder is used."
        ),
    ],
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write one HTML page with all these reports (figures embedded).",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Redraw the figures of saved reports from their data (the PNGs and a report.html
    next to each report.json), e.g. committed baselines after a kimi-bench upgrade.
    Nothing is measured again.

    Example: kimi-bench render reports/baselines/h200 --html h200.html
    """
    from kimi_bench.report.figures import PLOT_HINT, plot_available, render_tree
    from kimi_bench.report.html import write_html
    from kimi_bench.report.model import ReportError

    if not plot_available():
        raise usage_error(f"matplotlib is missing; {PLOT_HINT}")
    reports: list[dict[str, Any]] = []
    figures: list[Any] = []
    for p in paths:
        if not p.exists():
            raise usage_error(f"no such file or folder: {p}")
        try:
            done = render_tree(p)
        except (ReportError, OSError) as exc:
            raise usage_error(str(exc)) from None
        if not done:
            warn(f"no report.json under {p}")
        for item in done:
            reports.append(item.report)
            figures.append(item.rendered)
            names = ", ".join(f.name for f in item.figures) or "no figures for this kind"
            say(f"{item.report_path.parent}: {names}, report.html")
    if html is not None and reports:
        write_html(reports, html, title="kimi-bench reports", figures=figures)
        say(f"wrote {html}")
