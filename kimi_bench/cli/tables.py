"""The console's tables: :func:`show_tables` renders ``table`` (Rich), ``md`` or ``json``;
when stdout is not a terminal a Rich table is laid out at its natural width, so a pipe or a
CI log never gets a number wrapped mid-cell (the messages are in ``cli.common``)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from kimi_bench.cli import common
from kimi_bench.cli.common import OutputFormat
from kimi_bench.report import quote
from kimi_bench.report.quote import terminal
from kimi_bench.report.table import Column as ReportColumn
from kimi_bench.report.table import Rendered, Span, render
from kimi_bench.report.table import Table as ReportTable

# Tables off a terminal (a pipe, a file, a CI log): at most this wide. Text columns fold
# inside their cells, numbers are never split; a table whose numbers alone need more loses
# its last columns, named in a caption (they are in the report and in --format md/json).
PIPE_TABLE_WIDTH = 120


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


def cell_text(v: Any, text: str, fmt: str = "text") -> Text:
    """One table cell as literal text: ``text`` as every format writes ``v``
    (``report.table.show``), bools as a green yes / red NO (a ``choice`` column's plain),
    control characters made visible."""
    if isinstance(v, bool) and fmt == "choice":
        return Text(text)
    if isinstance(v, bool):
        return Text("yes", style="green") if v else Text("NO", style="bold red")
    if isinstance(v, (list, tuple)) and not all(isinstance(x, (int, float)) for x in v):
        return Text(terminal("x".join(map(str, v))))
    return Text(terminal(text))


def rich_table(
    title: str,
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    formats: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Table:
    """A Rich table whose numeric columns never wrap (text columns fold on a terminal);
    ``formats``/``headers``: a ``report.table.Column``'s format and header per key."""
    t = as_table((title, rows, columns), formats, headers)
    return _rich(t, t.cells())


def _rich(t: ReportTable, texts: list[list[str]]) -> Table:
    """``rich_table`` of a report table whose cells are written already (``texts``: row
    by row, ``Table.cells``)."""
    table = Table(title=Text(terminal(t.title)), show_lines=False, header_style="bold")
    for i, col in enumerate(t.columns):
        values = [r.get(col.key) for r in t.rows if r.get(col.key) is not None]
        numeric = bool(values) and all(
            _is_numeric(v) or isinstance(v, Span) or col.fmt in ("pct", "x", "span") for v in values
        )
        one_word = all(" " not in row[i] for r, row in zip(t.rows, texts, strict=True)
                       if r.get(col.key) is not None)  # fmt: skip
        table.add_column(
            Text(terminal(col.header)),
            no_wrap=numeric or i == 0 or one_word,
            overflow="ellipsis" if numeric else "fold",
            justify="right" if numeric and not isinstance(values[0], bool) else "left",
        )
    for r, row in zip(t.rows, texts, strict=True):
        table.add_row(*[cell_text(r.get(c.key), row[i], c.fmt) for i, c in enumerate(t.columns)])
    return table


class NaturalWidth:
    """Lay a table out at the width its cells need instead of the console's width.

    ``cap``: at most this wide where the cells allow (text columns fold); never narrower
    than the width at which no number is cut. ``fit=True`` (a terminal): the cap is the
    console width; the terminal then wraps lines that are still longer."""

    def __init__(self, renderable: Table, *, fit: bool = False, cap: int | None = None) -> None:
        self.renderable = renderable
        self.fit = fit
        self.cap = cap

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        need = Measurement.get(console, options.update_width(10_000), self.renderable)
        width = need.maximum
        cap = options.max_width if self.fit else self.cap
        floor = need.minimum
        if self.fit and isinstance(self.renderable, Table):
            # on a terminal a long word (a path) in a text column folds rather than push the
            # table past the screen; numbers and one-word names stay whole
            floor = min(floor, min_width(self.renderable, console, words_fold=True))
        if cap is not None:
            width = max(min(cap, need.maximum), floor)
        yield from console.render(self.renderable, options.update_width(max(width, 1)))


FOLD_MIN = 12  # a text column whose words may fold is at least this wide


def min_width(table: Table, console: Console | None = None, *, words_fold: bool = False) -> int:
    """The narrowest width at which no number of ``table`` is cut: a column that does not
    wrap (numbers, intervals, one-word names) needs its widest cell whole, any other its
    longest word (Rich measures every column by its longest word, and squeezes the rest
    to nothing when the table is wider than the console); ``words_fold``: a text column's
    long words may fold, so it needs at most :data:`FOLD_MIN`."""
    con = console or Console(width=10_000, file=io.StringIO())
    opts = con.options.update_width(10_000)
    total = 0
    for column in table.columns:
        cells = [column.header, *column.cells]
        sizes = [Measurement.get(con, opts, c) for c in cells]
        if column.no_wrap:
            total += max(m.maximum for m in sizes) + 2
        else:
            word = max(m.minimum for m in sizes)
            total += (min(word, FOLD_MIN) if words_fold else word) + 2
    return total + len(table.columns) + 1  # padding one a side, the borders between


def table_width(out: Console) -> int:
    """How wide a table may be on ``out``: a terminal's width, else :data:`PIPE_TABLE_WIDTH`."""
    return out.width if out.is_terminal else PIPE_TABLE_WIDTH


def print_table(table: Table, *, to: Console | None = None) -> None:
    out = to or common.console
    if out.is_terminal:
        out.print(NaturalWidth(table, fit=True), crop=False)
    else:
        out.print(NaturalWidth(table, cap=PIPE_TABLE_WIDTH), crop=False)


def fitting_table(
    title: str,
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    width: int,
    formats: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Table:
    """``rich_table`` with as many leading columns as fit ``width`` (numbers whole); the
    columns left out are named in the caption."""
    t = as_table((title, rows, columns), formats, headers)
    return _fitting(t, t.cells(), width)


def _fitting(t: ReportTable, texts: list[list[str]], width: int) -> Table:
    """``fitting_table`` of a report table whose cells are written already."""
    n = len(t.columns)
    table = _rich(t, texts)
    while n > 2 and min_width(table) > width:
        n -= 1
        part = ReportTable(t.key, t.title, t.columns[:n], t.rows, t.sources, t.about)
        table = _rich(part, [row[:n] for row in texts])
    if n < len(t.columns):
        rest = [c.header for c in t.columns[n:]]
        table.caption = Text(
            f"{len(rest)} more column(s) in the report and in --format md/json: "
            + terminal(", ".join(map(str, rest)))
        )
    return table


def _jsonable(v: Any) -> Any:
    if isinstance(v, Span):
        return {"low": v.low, "high": v.high, "kind": v.kind}
    return v


def _project(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    return [{c: _jsonable(r.get(c)) for c in columns} for r in rows]


Shown = tuple[str, Sequence[dict[str, Any]], Sequence[str]] | ReportTable


def as_table(
    t: Shown, formats: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> ReportTable:
    """A report table as it is, or plain ``(title, rows, columns)`` as one (``formats`` /
    ``headers``: a column's format and header by key)."""
    if isinstance(t, ReportTable):
        return t
    title, rows, cols = t
    fmts, heads = formats or {}, headers or {}
    return ReportTable.of_rows(
        title, rows, list(cols), lambda c: ReportColumn(c, heads.get(c, ""), fmts.get(c, "text"))
    )


def show_tables(
    tables: Sequence[Shown],
    fmt: OutputFormat | str = OutputFormat.table,
    *,
    to: Console | None = None,
    formats: dict[str, Any] | None = None,
) -> None:
    """Print tables on stdout in one format: ``table`` (Rich), ``md`` (one ``##`` heading
    and GitHub table each) or ``json`` (ONE document: ``{title: [rows]}``, so stdout parses
    as JSON). A table is ``(title, rows, columns)`` or a ``report.table.Table`` (a report's
    own table, as report.md and the HTML page show it). Each cell is written once
    (``Table.cells``), as every format writes it."""
    show_rendered([render(as_table(t, formats)) for t in tables], fmt, to=to)


def show_rendered(
    tables: Sequence[Rendered],
    fmt: OutputFormat | str = OutputFormat.table,
    *,
    to: Console | None = None,
) -> None:
    """``show_tables`` of tables whose cells and Markdown are written already
    (``report.table.render``; a report's ``View.rendered``)."""
    out = to or common.console
    kind = OutputFormat(fmt)
    if kind is OutputFormat.json:
        doc = {r.table.title: _project(r.table.rows, r.table.keys) for r in tables}
        out.out(json.dumps(doc, indent=1, default=str), highlight=False)
        return
    if kind is OutputFormat.md:
        for r in tables:
            out.out(f"## {quote.md(r.table.title)}\n\n" + r.markdown, highlight=False)
        return
    for r in tables:  # a terminal as a pipe: what fits its width, the other columns named
        print_table(_fitting(r.table, r.cells, table_width(out)), to=out)
