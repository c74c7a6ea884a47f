"""``kimi-bench project``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kimi_bench.cli.common import OutOpt, console, default_out, err_console, rich_table, usage_error


def _numbers(text: str, option: str, kind: type) -> tuple[Any, ...]:
    try:
        values = tuple(kind(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{option} takes comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValueError(f"{option} needs at least one value")
    return values


ReportsArg = Annotated[
    list[Path],
    typer.Argument(
        help="micro report(s) to calibrate on (report.json or its folder), one per carrier "
        "(shm, pickle)."
    ),
]
RanksOpt = Annotated[str, typer.Option("--ranks", help="Rank counts to project, comma-separated.")]
LinkOpt = Annotated[
    str,
    typer.Option(
        "--link-gbps",
        help="Link speed between nodes in Gbit/s (what gloo's TCP traffic gets), "
        "comma-separated for several.",
    ),
]
GpusOpt = Annotated[
    int, typer.Option("--gpus-per-node", min=1, help="GPUs (= ranks, one per GPU) per node.")
]
ValidateOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--validate",
        help="A measured micro report at another rank count on the calibration's host "
        "(repeatable): adds the prediction error table.",
    ),
]
CoresOpt = Annotated[
    int | None,
    typer.Option(
        "--host-cores",
        min=1,
        help="CPU cores per node when the calibration report does not record them (micro "
        "splits them between its processes).",
    ),
]
ThreadOpt = Annotated[
    float,
    typer.Option("--thread-exponent", help="A host copy with T threads takes T^-x as long."),
]
StreamsOpt = Annotated[
    float,
    typer.Option(
        "--loopback-streams", help="Concurrent gloo transfers one node carries at full speed."
    ),
]


def project(
    reports: ReportsArg,
    ranks: RanksOpt = "16,32,64",
    link_gbps: LinkOpt = "100",
    gpus_per_node: GpusOpt = 8,
    validate: ValidateOpt = None,
    host_cores: CoresOpt = None,
    thread_exponent: ThreadOpt = 0.65,
    loopback_streams: StreamsOpt = 1.7,
    out: OutOpt = None,
) -> None:
    """Project micro's stage costs to more ranks and nodes, calibrated on a micro report.

    Each stage scales by what it does (once per request, per-rank torch copies, gloo's
    binomial broadcast, H2D per GPU link, gather); the report states the model and what it
    fitted. With --validate it also predicts measured reports of the calibration's host and
    tabulates the error per stage and in total (target +-20% on totals). Exit code 0 when
    the projection was written, 2 for unusable input.

    Example: kimi-bench project r2-shm r2-pickle --ranks 16,32,64 --validate r4-pickle
    """
    from kimi_bench.project import (
        Host,
        ProjectionError,
        Scale,
        build_projection,
        emit_projection,
        read_calibration,
    )
    from kimi_bench.report import ReportError, load_report

    try:
        scale = Scale(
            ranks=_numbers(ranks, "--ranks", int),
            gpus_per_node=gpus_per_node,
            link_gbps=_numbers(link_gbps, "--link-gbps", float),
        )
        scale.validate()
        if thread_exponent < 0 or loopback_streams <= 0:
            raise ValueError("--thread-exponent must be >= 0 and --loopback-streams > 0")
        host = Host(
            cores=host_cores, thread_exponent=thread_exponent, loopback_streams=loopback_streams
        )
        cals = [read_calibration(load_report(p, "micro"), str(p)) for p in reports]
        carriers = [c.transport for c in cals]
        if len(set(carriers)) != len(carriers):
            raise ValueError(f"give one calibration report per carrier, got {carriers}")
        measured = [read_calibration(load_report(p, "micro"), str(p)) for p in validate or []]
        report = build_projection(cals, host, scale, measured)
    except (ReportError, ProjectionError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    out_dir = out or default_out("project")
    written = emit_projection(report, out_dir)
    console.print(
        rich_table(
            "project: predicted totals (ms)",
            report.data["totals"],
            ["transport", "ranks", "nodes", "link_gbps", "eager_ms", "deferred_ms", "speedup"],
        )
    )
    val = report.data["validation"]["totals"]
    if val:
        cols = ["transport", "ranks", "arm", "predicted_ms", "measured_ms", "error_pct"]
        console.print(rich_table("project: validation (totals)", val, [*cols, "within_target"]))
    for line in report.notes:
        if line.startswith(("MISSED", "validation")):
            err_console.print(f"[dim]note: {line}[/]")
    if not any(p.suffix == ".png" for p in written):
        from kimi_bench.report.figbase import PLOT_HINT

        err_console.print(f"[yellow]no figure:[/] {PLOT_HINT}")
    console.print(f"[bold]{report.summary['verdict']}[/]")
    console.print(f"report: {out_dir / 'report.json'}")
