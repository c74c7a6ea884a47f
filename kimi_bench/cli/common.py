"""The console: the one way a message reaches the user (its tables: ``cli.tables``).

Messages: :func:`say` (and :func:`note`, :func:`warn`, :func:`fail_line`,
:func:`verdict_line`, :func:`usage_error` built on it) prints text LITERALLY: no Rich
markup, no emoji codes, so ``[/tmp/x]``, gloo's ``[/...pair.cc:537]`` or a file called
``[red]y.png`` print as they are and never raise ``MarkupError``. Tables:
``cli.tables.show_tables`` renders ``table`` (Rich), ``md`` or ``json``; when stdout is not
a terminal a Rich table is laid out at its natural width, so a pipe or a CI log never gets
a number wrapped mid-cell. ``NO_COLOR`` is honoured (Rich reads it when a console is made).
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.progress import Progress

PIPE_WIDTH = 4096  # the line width of messages when output is not a terminal: no wrapping


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


class OutputFormat(enum.StrEnum):
    """How a command prints its tables on stdout."""

    table = "table"
    md = "md"
    json = "json"


def package_version() -> str:
    """The installed distribution's version, or the source tree's when running from a
    checkout that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kimi-bench")
    except PackageNotFoundError:
        import kimi_bench

        return kimi_bench.__version__


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
    # here, not at the top: importing the report package costs every command's start-up
    # (--help, usage errors) a third of a second
    from kimi_bench.report.quote import terminal

    if to is console and _stdout_is_document:
        to = err_console
    out = to or (err_console if err or _stdout_is_document else console)
    text = Text()
    if label:
        text.append(terminal(label), style=label_style or style)
        text.append(" ")
    text.append(terminal(message), style=style)
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


TONE_STYLE = {"good": "bold green", "bad": "bold red", "unresolved": "bold yellow", "info": "bold"}


def verdict_lines(lines: Sequence[Any], *, to: Console | None = None) -> None:
    """A report's verdict lines (``report.verdicts.Line``), each in its tone's colour: the
    same lines, in the same words, as its HTML page and report.md."""
    for line in lines:
        say(line.text, style=TONE_STYLE.get(line.tone, "bold"), to=to)


def usage_error(message: object) -> typer.Exit:
    """Print a clear message and return the exit (code 2) for the caller to raise."""
    fail_line(message)
    return typer.Exit(code=2)


def progress_bar(total: int | None, description: str) -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

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
