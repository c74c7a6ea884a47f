"""``kimi-bench project``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from kimi_bench.cli.common import (
    OutOpt,
    claim_output,
    console,
    default_out,
    err_console,
    note,
    rich_table,
    usage_error,
)
from kimi_bench.limits import (
    MAX_GPUS_PER_NODE,
    MAX_HOST_CORES,
    MAX_LINK_GBPS,
    MAX_LOOPBACK_STREAMS,
    MAX_PROJECT_RANKS,
    MAX_THREAD_EXPONENT,
    bounded,
)


def _numbers(
    text: str, option: str, kind: type, low: float, high: float, *, low_open: bool = False
) -> tuple[Any, ...]:
    """Comma-separated numbers, each finite and within the option's bounds."""
    try:
        values = tuple(kind(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{option} takes comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValueError(f"{option} needs at least one value")
    for v in values:
        bounded(v, option, low, high, low_open=low_open)
    return values


ReportsArg = Annotated[
    list[Path],
    typer.Argument(
        help="micro report(s) to calibrate on (report.json or its folder), one per carrier "
        "(shm, pickle)."
    ),
]
RanksOpt = Annotated[
    str,
    typer.Option(
        "--ranks", help=f"Rank counts to project, comma-separated (1..{MAX_PROJECT_RANKS})."
    ),
]
LinkOpt = Annotated[
    str,
    typer.Option(
        "--link-gbps",
        help="Link speed between nodes in Gbit/s (what gloo's TCP traffic gets), "
        f"comma-separated for several (> 0, <= {MAX_LINK_GBPS:g}).",
    ),
]
GpusOpt = Annotated[
    int,
    typer.Option(
        "--gpus-per-node",
        min=1,
        max=MAX_GPUS_PER_NODE,
        help="GPUs (= ranks, one per GPU) per node.",
    ),
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
        max=MAX_HOST_CORES,
        help="CPU cores per node when the calibration report does not record them (micro "
        "splits them between its processes).",
    ),
]
ThreadOpt = Annotated[
    float,
    typer.Option(
        "--thread-exponent",
        help=f"A host copy with T threads takes T^-x as long (0..{MAX_THREAD_EXPONENT:g}).",
    ),
]
StreamsOpt = Annotated[
    float,
    typer.Option(
        "--loopback-streams",
        help="Concurrent gloo transfers one node carries at full speed "
        f"(> 0, <= {MAX_LOOPBACK_STREAMS:g}).",
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
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="Write into an --out folder that holds a finished report."
        ),
    ] = False,
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
            ranks=_numbers(ranks, "--ranks", int, 1, MAX_PROJECT_RANKS),
            gpus_per_node=gpus_per_node,
            link_gbps=_numbers(link_gbps, "--link-gbps", float, 0, MAX_LINK_GBPS, low_open=True),
        )
        scale.validate()
        bounded(thread_exponent, "--thread-exponent", 0, MAX_THREAD_EXPONENT)
        bounded(loopback_streams, "--loopback-streams", 0, MAX_LOOPBACK_STREAMS, low_open=True)
        host = Host(
            cores=host_cores, thread_exponent=thread_exponent, loopback_streams=loopback_streams
        )
        cals = [read_calibration(load_report(p, "micro"), str(p)) for p in reports]
        carriers = [c.transport for c in cals]
        if len(set(carriers)) != len(carriers):
            raise ValueError(f"give one calibration report per carrier, got {carriers}")
        measured = [read_calibration(load_report(p, "micro"), str(p)) for p in validate or []]
        report = build_projection(cals, host, scale, measured)
        out_dir = out or default_out("project")
        claim_output(out_dir, "--out", overwrite=overwrite)
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
    tots = [t for t in report.data["totals"] if t["ranks"] in asked]
    if tots:
        console.print(
            rich_table(
                "project: predicted totals (ms)",
                tots,
                ["transport", "ranks", "nodes", "link_gbps", "eager_ms", "deferred_ms", "speedup"],
            )
        )
    for line in report.notes:
        skipped = line.split(" ranks (", 1)[0].split(" at ")
        if len(skipped) == 2 and skipped[1].isdigit() and int(skipped[1]) in asked:
            note(f"not projected: {line}")
    val = report.data["validation"]["totals"]
    if val:
        cols = ["transport", "ranks", "arm", "predicted_ms", "measured_ms", "error_pct"]
        console.print(rich_table("project: validation (totals)", val, [*cols, "within_target"]))
    for line in report.notes:
        if line.startswith(("MISSED", "validation")):
            note(line)
