"""``kimi-bench render``: figures and the HTML page again, from saved report.json files."""

from __future__ import annotations

from typing import Any

import typer

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import fail_line, say, usage_error, warn
from kimi_bench.options import RenderOptions

RENDER_DOC = """Redraw saved reports from their data: the figures (PNGs), report.md and
report.html next to each report.json, e.g. the committed reports (which keep only
report.json and report.md) or baselines after a kimi-bench upgrade. Nothing is measured
again.

Example: kimi-bench render reports/baselines/h200 --html h200.html
"""


def _render(opts: RenderOptions, _: dict[str, Any]) -> None:
    from kimi_bench.cli.output import user_file
    from kimi_bench.report.figures import PLOT_HINT, plot_available
    from kimi_bench.report.html import render_html
    from kimi_bench.report.model import ReportError
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE, OutputError, check_output_file
    from kimi_bench.report.rerender import render_tree
    from kimi_bench.report.view import View

    paths, html = opts.paths, opts.html
    try:
        if html is not None:  # a folder or an unwritable place: refused before any drawing
            check_output_file(html, "--html")
    except OutputError as exc:
        raise usage_error(str(exc)) from None
    for p in paths:
        if not p.exists():
            raise usage_error(f"no such file or folder: {p}")
    if not plot_available():
        raise usage_error(f"matplotlib is missing; {PLOT_HINT}")
    reports: list[View] = []
    figures: list[Any] = []
    for p in paths:
        try:
            done = render_tree(p)
        except ReportError as exc:
            raise usage_error(str(exc)) from None
        except OSError as exc:  # the figures or a page next to a report could not be written
            fail_line(f"cannot write beside the reports under {p}: {exc}")
            raise typer.Exit(code=EXIT_OUTPUT_INCOMPLETE) from None
        if not done:
            warn(f"no report.json under {p}")
        for item in done:
            reports.append(item.report)
            figures.append(item.rendered)
            names = ", ".join(f.name for f in item.figures) or "no figures for this kind"
            say(f"{item.report_path.parent}: {names}, report.md, report.html")
    if html is not None:
        if not reports:
            raise usage_error(
                f"no report.json under {', '.join(map(str, paths))}: {html} not written"
            )
        page = render_html(reports, title="kimi-bench reports", figures=figures)
        if user_file(html, page, "--html"):
            raise typer.Exit(code=EXIT_OUTPUT_INCOMPLETE)
        say(f"wrote {html}")


render = model_command(RenderOptions, _render, RENDER_DOC)
