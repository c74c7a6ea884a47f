"""``kimi-bench project``."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import console, err_console, note, usage_error
from kimi_bench.cli.output import default_out
from kimi_bench.options import ProjectOptions

PROJECT_DOC = """Project micro's stage costs to more ranks and nodes, calibrated on a micro report.

Each stage scales by what it does (once per request, per-rank torch copies, gloo's
binomial broadcast, H2D per GPU link, gather); the report states the model and what it
fitted. With --validate it also predicts measured reports of the calibration's host and
tabulates the error per stage and in total (target +-20% on totals). Exit code 0 when
the projection was written, 2 for unusable input.

Example: kimi-bench project r2-shm r2-pickle --ranks 16,32,64 --validate r4-pickle
"""


def _project(opts: ProjectOptions, _: dict[str, Any]) -> None:
    from kimi_bench.project import (
        Host,
        ProjectionError,
        Scale,
        build_projection,
        emit_projection,
        load_probe,
        read_calibration,
    )
    from kimi_bench.report.model import ReportError, load_report
    from kimi_bench.report.output import claim_output

    try:
        scale = Scale(ranks=opts.ranks, gpus_per_node=opts.gpus_per_node, link_gbps=opts.link_gbps)
        scale.validate()
        host = Host(
            cores=opts.host_cores,
            thread_exponent=opts.thread_exponent,
            loopback_streams=opts.loopback_streams,
            probe=load_probe(opts.host_probe),
        )
        cals = [read_calibration(load_report(p, "micro"), str(p)) for p in opts.reports]
        carriers = [c.transport for c in cals]
        if len(set(carriers)) != len(carriers):
            raise ValueError(f"give one calibration report per carrier, got {carriers}")
        measured = [read_calibration(load_report(p, "micro"), str(p)) for p in opts.validate_]
        report = build_projection(cals, host, scale, measured)
        out_dir = opts.out or default_out("project")
        claim_output(out_dir, "--out", overwrite=opts.overwrite)
    except (ReportError, ProjectionError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    written = emit_projection(report, out_dir)
    _show(report, scale.ranks)
    if not any(p.suffix == ".png" for p in written):
        from kimi_bench.report.figbase import PLOT_HINT

        err_console.print(f"[yellow]no figure:[/] {PLOT_HINT}")
    console.print(f"[bold]{escape(report.summary['verdict'])}[/]")
    console.print(f"report: {escape(str(out_dir / 'report.json'))}")


def _show(report: Any, asked: tuple[int, ...]) -> None:
    """The totals at the asked rank counts (the report and figure also hold the curve's
    other points), why an asked count has none, and the validation."""
    from kimi_bench.cli.tables import show_tables

    tots = [t for t in report.data["totals"] if t["ranks"] in asked]
    if tots:
        cols = ["transport", "ranks", "nodes", "link_gbps", "eager_ms", "deferred_ms", "speedup"]
        show_tables([("project: predicted totals (ms)", tots, cols)])
    for line in report.notes:
        skipped = line.split(" ranks (", 1)[0].split(" at ")
        if len(skipped) == 2 and skipped[1].isdigit() and int(skipped[1]) in asked:
            note(f"not projected: {line}")
    val = report.data["validation"]["totals"]
    if val:
        cols = ["transport", "ranks", "arm", "predicted_ms", "measured_ms", "error_pct"]
        show_tables([("project: validation (totals)", val, [*cols, "within_target"])])
    for line in report.notes:
        if line.startswith(("MISSED", "validation")):
            note(line)


project = model_command(ProjectOptions, _project, PROJECT_DOC)
