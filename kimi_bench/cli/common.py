"""Options shared by several commands (defined once) and small rendering helpers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console(stderr=False)
err_console = Console(stderr=True)

PresetOpt = Annotated[
    str,
    typer.Option("--preset", help="Preprocessing preset: kimi-k3 or kimi-k2.5."),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="A checkpoint's preprocessor_config.json (keys under media_proc_cfg or top "
        "level); overrides --preset.",
        dir_okay=False,
    ),
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device",
        help="auto (CUDA if present), cpu or cuda. On cpu the owner's GPU is emulated and "
        "the report says so.",
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for generated images and arrivals.")]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Output folder for report.json, report.md, CSV and plots "
        "(default: reports/runs/<kind>-<timestamp>).",
        file_okay=False,
    ),
]


def default_out(kind: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / "runs" / f"{kind}-{stamp}"


def usage_error(message: str) -> typer.Exit:
    """Print a clear message and return the exit (code 2) for the caller to raise."""
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code=2)


def progress_bar(total: int | None, description: str) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[item]}"),
        console=err_console,
        transient=False,
    )


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "[green]yes[/]" if v else "[bold red]NO[/]"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "x".join(map(str, v))
    return str(v)


def rich_table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold")
    for i, c in enumerate(columns):
        table.add_column(c, overflow="fold", no_wrap=i == 0)
    for r in rows:
        table.add_row(*[_fmt(r.get(c)) for c in columns])
    return table


RuntimeOpt = Annotated[
    str,
    typer.Option(
        "--runtime",
        help="Runtime behaviour to emulate: sglang-0.5.23 (default, newest: shm receivers map "
        "copy-on-write, per-image decisions) or pr-33921 (receivers clone, per-request "
        "decisions).",
    ),
]
