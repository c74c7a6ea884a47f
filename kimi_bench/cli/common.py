"""Options shared by several commands (defined once) and the console: the one way a
message or a table reaches the user.

Messages: :func:`say` (and :func:`note`, :func:`warn`, :func:`fail_line`,
:func:`verdict_line`, :func:`usage_error` built on it) prints text LITERALLY: no Rich
markup, no emoji codes, so ``[/tmp/x]``, gloo's ``[/...pair.cc:537]`` or a file called
``[red]y.png`` print as they are and never raise ``MarkupError``. Tables: :func:`show_tables`
renders ``table`` (Rich), ``md`` or ``json``; when stdout is not a terminal a Rich table is
laid out at its natural width, so a pipe or a CI log never gets a number wrapped mid-cell.
``NO_COLOR`` is honoured (Rich reads it when a console is made).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

PIPE_WIDTH = 4096  # the line width when output is not a terminal: nothing wraps


def _is_tty(stream: IO[str] | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def make_console(
    *,
    stderr: bool = False,
    file: IO[str] | None = None,
    width: int | None = None,
    force_terminal: bool | None = None,
) -> Console:
    """A console for user output. Markup is still available to our own fixed strings, but
    every user-visible text goes through :func:`say` / :func:`show_tables`, which never
    parse it; ``highlight`` is off so numbers and paths are not recoloured.

    When the output is not a terminal (a pipe, a file, a CI log) and neither ``width`` nor
    ``COLUMNS`` says otherwise, the width is :data:`PIPE_WIDTH`, so even a plain
    ``console.print(table)`` lays the table out at its natural width."""
    target = file if file is not None else (sys.stderr if stderr else sys.stdout)
    if width is None and not force_terminal and "COLUMNS" not in os.environ:
        width = None if _is_tty(target) else PIPE_WIDTH
    return Console(
        stderr=stderr,
        file=file,
        width=width,
        force_terminal=force_terminal,
        highlight=False,
        emoji=False,
    )


console = make_console()
err_console = make_console(stderr=True)

# Set while a command prints --format json: stdout then holds that one JSON document and
# every message (verdict, notes, paths) goes to stderr. Reset by every command at start.
_stdout_is_document = False


def stdout_is_document(value: bool) -> None:
    """Say whether stdout is reserved for one JSON document (``--format json``)."""
    global _stdout_is_document
    _stdout_is_document = value


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


class OutputFormat(enum.StrEnum):
    """How a command prints its tables on stdout."""

    table = "table"
    md = "md"
    json = "json"


FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="Tables on stdout as a Rich table (default), Markdown (md) or JSON (json). With "
        "json, stdout holds one JSON document and every message goes to stderr.",
        case_sensitive=False,
    ),
]


def package_version() -> str:
    """The installed distribution's version, or the source tree's when running from a
    checkout that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kimi-bench")
    except PackageNotFoundError:
        import kimi_bench

        return kimi_bench.__version__


def default_out(kind: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / "runs" / f"{kind}-{stamp}"


# ------------------------------------------------------------------------------- messages


def say(
    message: object,
    *,
    style: str | None = None,
    label: str | None = None,
    label_style: str | None = None,
    err: bool = False,
    to: Console | None = None,
) -> None:
    """Print one user-facing message. ``message`` (and ``label``) are taken literally:
    whatever brackets, backslashes or colons they hold is printed as is. Off a terminal the
    line is not wrapped at the console width (logs keep long paths whole)."""
    if to is console and _stdout_is_document:
        to = err_console
    out = to or (err_console if err or _stdout_is_document else console)
    text = Text()
    if label:
        text.append(str(label), style=label_style or style)
        text.append(" ")
    text.append(str(message), style=style)
    out.print(text, soft_wrap=not out.is_terminal)


def note(message: object, *, to: Console | None = None) -> None:
    say(message, label="note:", style="dim", err=True, to=to)


def warn(message: object, *, label: str = "warning:", to: Console | None = None) -> None:
    say(message, label=label, label_style="bold yellow", err=True, to=to)


def fail_line(message: object, *, label: str = "error:", to: Console | None = None) -> None:
    say(message, label=label, label_style="bold red", err=True, to=to)


def verdict_line(message: object, ok: bool | None, *, to: Console | None = None) -> None:
    """The verdict: green when ok, red when not, yellow when undecided (None)."""
    style = {True: "bold green", False: "bold red", None: "bold yellow"}[ok]
    say(message, style=style, to=to)


def usage_error(message: object) -> typer.Exit:
    """Print a clear message and return the exit (code 2) for the caller to raise."""
    fail_line(message)
    return typer.Exit(code=2)


def progress_bar(total: int | None, description: str) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        # the item is a file name or label from the user: never parsed as markup
        TextColumn("{task.fields[item]}", markup=False),
        console=err_console,
        transient=False,
    )


# --------------------------------------------------------------------------------- tables


_NUMBERISH = re.compile(r"[-+]?\d[\d.,]*(e[-+]?\d+)?(x\d[\d.]*)*%?( ?[a-zA-Z/]{1,4})?")


def _is_numeric(v: Any) -> bool:
    """Numbers, booleans, shapes (``[1, 10, 20]``) and number-like text (``640x480``,
    ``+5.3%``, ``12.1 ms``): cells that must never be split across lines."""
    if isinstance(v, (bool, int, float)):
        return True
    if isinstance(v, str):
        return _NUMBERISH.fullmatch(v.strip()) is not None
    return isinstance(v, (list, tuple)) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in v
    )


def cell_text(v: Any) -> Text:
    """One table cell as literal text (bools as a green yes / red NO)."""
    if v is None:
        return Text("-")
    if isinstance(v, bool):
        return Text("yes", style="green") if v else Text("NO", style="bold red")
    if isinstance(v, float):
        return Text(f"{v:.4g}")
    if isinstance(v, (list, tuple)):
        return Text("x".join(map(str, v)))
    return Text(str(v))


def rich_table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Table:
    """A Rich table whose numeric columns never wrap (text columns fold on a terminal)."""
    table = Table(title=Text(str(title)), show_lines=False, header_style="bold")
    for i, c in enumerate(columns):
        values = [r.get(c) for r in rows if r.get(c) is not None]
        numeric = bool(values) and all(_is_numeric(v) for v in values)
        table.add_column(
            Text(str(c)),
            no_wrap=numeric or i == 0,
            overflow="ellipsis" if numeric else "fold",
            justify="right" if numeric and not isinstance(values[0], bool) else "left",
        )
    for r in rows:
        table.add_row(*[cell_text(r.get(c)) for c in columns])
    return table


class NaturalWidth:
    """Lay a table out at the width its cells need instead of the console's width.

    ``fit=False`` (pipes, files, CI logs): the full natural width, nothing wraps.
    ``fit=True`` (a terminal): the console width when the table fits in it, else the
    narrowest width at which no number is cut (text columns fold); the terminal then
    wraps the long lines rather than Rich cutting cells."""

    def __init__(self, renderable: Table, *, fit: bool = False) -> None:
        self.renderable = renderable
        self.fit = fit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        need = Measurement.get(console, options.update_width(10_000), self.renderable)
        width = need.maximum
        if self.fit:
            width = max(min(options.max_width, need.maximum), need.minimum)
        yield from console.render(self.renderable, options.update_width(max(width, 1)))


def print_table(table: Table, *, to: Console | None = None) -> None:
    out = to or console
    out.print(NaturalWidth(table, fit=out.is_terminal), crop=False)


def _project(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    return [{c: r.get(c) for c in columns} for r in rows]


def show_tables(
    tables: Sequence[tuple[str, Sequence[dict[str, Any]], Sequence[str]]],
    fmt: OutputFormat | str = OutputFormat.table,
    *,
    to: Console | None = None,
) -> None:
    """Print ``(title, rows, columns)`` tables on stdout in one format: ``table`` (Rich),
    ``md`` (one ``##`` heading and GitHub table each) or ``json`` (ONE document:
    ``{title: [rows]}``, so stdout parses as JSON)."""
    from kimi_bench.report.writers import markdown_table

    out = to or console
    kind = OutputFormat(fmt)
    if kind is OutputFormat.json:
        doc = {title: _project(rows, cols) for title, rows, cols in tables}
        out.out(json.dumps(doc, indent=1, default=str), highlight=False)
    elif kind is OutputFormat.md:
        for title, rows, cols in tables:
            out.out(f"## {title}\n\n" + markdown_table(list(rows), cols), highlight=False)
    else:
        for title, rows, cols in tables:
            print_table(rich_table(title, rows, cols), to=out)


RuntimeOpt = Annotated[
    str,
    typer.Option(
        "--runtime",
        help="Runtime behaviour to emulate: sglang-0.5.23 (default, newest: shm receivers map "
        "copy-on-write, per-image decisions) or pr-33921 (receivers clone, per-request "
        "decisions).",
    ),
]


def output_params() -> list[Any]:
    """``--out``/``--output-dir`` and ``--format``, shared by every command that writes a
    report."""
    import inspect

    out = typer.Option(
        "--out",
        "--output-dir",
        help="Output folder for report.json, report.md, report.html, CSV and figures "
        "\\[default: reports/runs/<kind>-<timestamp>]. One run holds it at a time (another "
        "run given it exits 2); a folder with a finished report is refused unless "
        "--overwrite.",
        file_okay=False,
        show_default=False,
    )
    overwrite = typer.Option(
        "--overwrite",
        help="Write into an --output-dir that holds a finished report, replacing its files.",
        show_default=False,
    )
    fmt = typer.Option(
        "--format",
        help="Console tables as table, md or json (json: stdout is one JSON document).",
        show_default=False,
    )
    jsonl = typer.Option(
        "--append-jsonl",
        help="Append one line with this run's summary (kind, commit, device, verdict, key "
        "numbers) to FILE, for dashboards.",
        dir_okay=False,
        show_default=False,
    )
    kw = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter("out", kw, default=None, annotation=Annotated[Path | None, out]),
        inspect.Parameter("format", kw, default=None, annotation=Annotated[str | None, fmt]),
        inspect.Parameter(
            "append_jsonl", kw, default=None, annotation=Annotated[Path | None, jsonl]
        ),
        inspect.Parameter("overwrite", kw, default=False, annotation=Annotated[bool, overwrite]),
    ]


def append_jsonl(values: dict[str, Any], report: Any, out_dir: Path) -> None:
    """``--append-jsonl FILE``: one JSON line per run (the summary without bulky lists)."""
    path = values.get("append_jsonl")
    if not path:
        return
    env = report.environment
    line = {
        "kind": report.kind,
        "created": env.get("created"),
        "git": (env.get("git") or {}).get("commit"),
        "device": env.get("device_name"),
        "report": str(out_dir / "report.json"),
        "metadata": env.get("metadata") or {},
        **{k: v for k, v in report.summary.items() if not isinstance(v, (list, dict))},
    }
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, default=str) + "\n")
    except OSError as exc:
        warn(f"could not append to {path}: {exc.strerror or exc}")


def resolve_output(values: dict[str, Any], kind: str) -> tuple[Path, OutputFormat]:
    """The output folder (checked writable before any work) and the console format."""
    try:
        fmt = OutputFormat(values.get("format") or "table")
    except ValueError:
        raise ValueError("--format must be table, md or json") from None
    stdout_is_document(fmt is OutputFormat.json)
    given = values.get("out")
    if given:
        claim_output(given, overwrite=bool(values.get("overwrite")))
        return given, fmt
    return _claim_default(default_out(kind)), fmt


def _claim_default(base: Path) -> Path:
    """The default folder, or ``<base>-2``, ``-3``... when a run started in the same second
    holds it: runs left to their default folders never collide."""
    from kimi_bench.report.output import OutputError

    for n in range(1, 100):
        out = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            claim_output(out)
            return out
        except OutputError:
            if not out.is_dir():
                raise  # not a taken folder: a real problem (read-only, a file in the way)
    raise OutputError(f"no free output folder next to {base}; give --output-dir")


_claims: list[Any] = []  # this process's output folders (report.output.OutputClaim)


def claim_output(out: Path, option: str = "--output-dir", *, overwrite: bool = False) -> None:
    """Hold ``out`` for this command (the kernel drops the hold when the process ends).
    An OutputError (a ValueError: a usage error) when another run holds it or it holds a
    finished report and ``overwrite`` is not set."""
    from kimi_bench.report.output import claim_output_dir

    _claims.append(claim_output_dir(out, option, overwrite=overwrite))


def release_claims() -> None:
    """Drop the holds of earlier commands run in this process (CliRunner, library use)."""
    while _claims:
        _claims.pop().release()


def write_report(write: Any, out_dir: Path) -> Any:
    """Write a report folder; if that fails at the end, into a printed fallback folder
    (exit code 3 then says the output is not where it was asked for)."""
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE, OutputError, write_outputs

    try:
        result = write_outputs(write, out_dir)
    except OutputError as exc:
        fail_line(str(exc))
        raise typer.Exit(code=EXIT_OUTPUT_INCOMPLETE) from None
    if result.fallback:
        warn(f"could not write {result.error}; the report is in {result.folder}")
    return result
