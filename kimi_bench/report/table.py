"""A table of a report as every format shows it: its columns (with how each value is
written), its rows of values as ``report.json`` holds them, and for every cell the place
in ``report.json`` it was read from (a JSON pointer), so a test can hold each cell of the
page against the file.

:func:`show` writes one value; Markdown, HTML and the terminal all call it, so the same
number reads the same everywhere (``+37.3%``, ``2.63x``, ``0.0834``). Text is returned as
it is: each writer quotes it for its format (``report.quote``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kimi_bench.report import quote

# how a column's values are written
# "choice": a yes/no that is a decision, not a verdict (parity's deferred: no colour, "no")
Fmt = Literal["text", "num", "int", "pct", "x", "flag", "shape", "span", "choice"]
# one pointer, or several (an interval cell reads its low and high end)
Source = str | tuple[str, ...]
MISSING = "-"


@dataclass(frozen=True)
class Span:
    """An interval cell: ``low .. high`` in the column's unit, and what kind of interval
    (``ci``: a 95% confidence interval; ``range``: min..max of too few units)."""

    low: float | None
    high: float | None
    kind: str = "ci"
    unit: Literal["pct", "x", "num"] = "num"


@dataclass(frozen=True)
class Column:
    key: str
    label: str = ""
    fmt: Fmt = "text"
    fold: bool = False  # long text: the HTML page folds it behind a disclosure

    @property
    def header(self) -> str:
        return self.label or self.key


@dataclass
class Table:
    """``rows[i][column.key]`` is a value; ``sources[i][column.key]`` (when there) the
    JSON pointer of that value in the report."""

    key: str
    title: str
    columns: list[Column]
    rows: list[dict[str, object]] = field(default_factory=list)  # a cell: any stored value
    sources: list[dict[str, Source]] = field(default_factory=list)
    about: str = ""

    def add(self, values: dict[str, object], src: dict[str, Source] | None = None) -> None:
        self.rows.append(values)
        self.sources.append(src or {})

    @classmethod
    def of_rows(
        cls,
        title: str,
        rows: Iterable[Mapping[str, object]],
        columns: Sequence[str],
        columns_of: Callable[[str], Column] = Column,
    ) -> Table:
        """Plain rows as a table of ``columns`` (``columns_of(key)`` makes each column)."""
        table = cls("rows", title, [columns_of(c) for c in columns])
        for r in rows:
            table.add({c: r.get(c) for c in columns})
        return table

    @property
    def keys(self) -> list[str]:
        return [c.key for c in self.columns]

    def cells(self) -> list[list[str]]:
        """Every row as the text of its cells (what each format prints)."""
        return [[show(r.get(c.key), c.fmt) for c in self.columns] for r in self.rows]


@dataclass(frozen=True)
class Rendered:
    """A table with the text of every cell (``Table.cells``) and its GitHub Markdown
    (numbers as every format writes them, text quoted): what a writer or the terminal
    prints, made once."""

    table: Table
    cells: list[list[str]]
    markdown: str


def render(t: Table) -> Rendered:
    """``t`` with its cells written and its Markdown (``_(none)_`` without rows)."""
    cells = t.cells()
    if not t.rows:
        return Rendered(t, cells, "_(none)_\n")
    lines = ["| " + " | ".join(quote.md(c.header) for c in t.columns) + " |",
             "|" + "---|" * len(t.columns)]  # fmt: skip
    lines += ["| " + " | ".join(quote.md(text) for text in row) + " |" for row in cells]
    return Rendered(t, cells, "\n".join(lines) + "\n")


def pointer(*parts: Any) -> str:
    """A JSON pointer (RFC 6901): ``pointer("ab", "inf", "deferred")`` = ``/ab/inf/deferred``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(doc: Any, ptr: str) -> Any:
    """The value at a JSON pointer; KeyError/IndexError when it is not there."""
    node = doc
    for raw in ptr.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _number(v: float) -> str:
    return f"{v:.4g}"


def _pct(v: float) -> str:
    return f"{v:+.1f}%"


def _ratio(v: float) -> str:
    return f"{v:.3g}x"


def _span(s: Span) -> str:
    lo, hi = _finite(s.low), _finite(s.high)
    if lo is None or hi is None:
        return MISSING
    write = {"pct": _pct, "x": _ratio, "num": _number}[s.unit]
    name = {"ci": "95% CI", "prediction": "95% re-run interval"}.get(s.kind, s.kind)
    return f"{write(lo)} .. {write(hi)} ({name})"


def show(value: object, fmt: Fmt = "text") -> str:
    """One cell's text: ``-`` for a missing or non-finite value; numbers in the column's
    format; booleans ``yes``/``NO`` (a ``choice``: ``yes``/``no``); shapes ``1x36x46``."""
    if value is None:
        return MISSING
    if isinstance(value, Span):
        return _span(value)
    if isinstance(value, bool):
        return "yes" if value else ("no" if fmt == "choice" else "NO")
    if isinstance(value, (list, tuple)) and all(_finite(x) is not None for x in value):
        return "x".join(str(x) for x in value)
    number = _finite(value)
    if number is None:
        if isinstance(value, float):
            return MISSING  # NaN / infinity
        if isinstance(value, (dict, list, tuple)):
            import json

            return json.dumps(value, default=str)
        return str(value)
    if fmt == "pct":
        return _pct(number)
    if fmt == "x":
        return _ratio(number)
    if isinstance(value, int) or fmt == "int":
        return str(int(number)) if float(number).is_integer() else _number(number)
    return _number(number)


def generic(
    key: str, title: str, rows: Sequence[object], base: str, columns: list[str] | None = None
) -> Table:
    """A table of plain rows stored in the report at ``base`` (a JSON pointer to the
    list): the given columns, else every key in order of first appearance."""
    dicts = [r for r in rows if isinstance(r, dict)]
    cols = columns or list(dict.fromkeys(k for r in dicts for k in r))
    table = Table(key, title, [Column(c) for c in cols])
    for i, r in enumerate(rows):
        if isinstance(r, dict):  # a row that is not an object is not shown
            table.add({c: r.get(c) for c in cols}, {c: f"{base}/{i}{pointer(c)}" for c in cols})
    return table
