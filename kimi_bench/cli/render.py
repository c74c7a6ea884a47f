"""``kimi-bench render``: figures and the HTML page again, from saved report.json files."""

from __future__ import annotations

from typing import Any

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import say, usage_error, warn
from kimi_bench.options import RenderOptions

RENDER_DOC = """Redraw saved reports from their data: the figures (PNGs), report.md and
report.html next to each report.json, e.g. the committed reports (which keep only
report.json and report.md) or baselines after a kimi-bench upgrade. Nothing is measured
again.

Example: kimi-bench render reports/baselines/h200 --html h200.html
"""


def _render(opts: RenderOptions, _: dict[str, Any]) -> None:
    from kimi_bench.report.figures import PLOT_HINT, plot_available
    from kimi_bench.report.html import write_html
    from kimi_bench.report.model import ReportError
    from kimi_bench.report.rerender import render_tree

    paths, html = opts.paths, opts.html
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
            say(f"{item.report_path.parent}: {names}, report.md, report.html")
    if html is not None and reports:
        write_html(reports, html, title="kimi-bench reports", figures=figures)
        say(f"wrote {html}")


render = model_command(RenderOptions, _render, RENDER_DOC)
