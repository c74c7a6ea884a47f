"""One self-contained HTML page per run: verdicts, environment, notes, figures (embedded
as base64 PNG), summary and result tables, gate verdicts.

The page has no external reference of any kind (no CSS, script, font or image URL), so it
opens from the file system with no server and no network. Every string that comes from
a report, a file name or the user is quoted by ``report.quote`` (escaped, control
characters shown). The tables are ``report.tables``: the ones Markdown and the terminal
show, each cell marked with the JSON pointer of its value (``data-src``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kimi_bench.report import access, quote, verdicts
from kimi_bench.report.figbase import RenderedFigure
from kimi_bench.report.figures import figures_png
from kimi_bench.report.gate_verdict import RuleResult, gate_line
from kimi_bench.report.kinds import Envelope
from kimi_bench.report.model import Report
from kimi_bench.report.table import Column, Span, Table, show
from kimi_bench.report.view import View, view_of
from kimi_bench.report.writers import atomic_write_text

MAX_ROWS = 500  # rows per table on the page; report.json keeps all of them

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d1d1f;
background:#fafafa;line-height:1.45}
main{max-width:1500px;margin:0 auto;padding:1rem 2rem 3rem}
h1{margin:.6rem 0}h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2.4rem}
h3{margin:1.4rem 0 .4rem}
.verdict{padding:.5rem .9rem;border-radius:6px;font-weight:600;margin:.6rem 0}
.verdict ul{margin:0;padding-left:1.1rem}.verdict li{margin:.15rem 0}
.verdict.good{background:#e3f4e8;border-left:6px solid #1b9e77}
.verdict.bad{background:#fde8e8;border-left:6px solid #c0392b}
.verdict.unresolved{background:#fdf3dc;border-left:6px solid #c98a00}
.verdict.info{background:#eef3fa;border-left:6px solid #5b7db1}
.verdict li.good::marker{color:#1b9e77}.verdict li.bad{color:#a5281b}
.verdict li.unresolved{color:#7a5500}.verdict li.info{color:#34507a}
table{border-collapse:collapse;font-size:.85rem;margin:.4rem 0 1rem;background:#fff}
th,td{border:1px solid #d8d8d8;padding:.22rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}
td.yes{color:#137a4f;font-weight:600}td.no{color:#b02a1e;font-weight:700}
.scroll{overflow-x:auto;max-width:100%}
.scroll th,.scroll td{white-space:nowrap}
td details summary{cursor:pointer;color:#333}td details[open] summary{color:#666}
td details[open]{white-space:normal;min-width:24em;max-width:48em}
figure{margin:1rem 0 1.6rem;background:#fff;border:1px solid #e2e2e2;padding:.6rem}
figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:.85rem;color:#444;margin-top:.4rem}
ul.notes li{margin:.2rem 0}
nav a{margin-right:1rem}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.8rem}
pre{background:#fff;border:1px solid #e2e2e2;padding:.6rem;overflow-x:auto}
.muted{color:#666;font-size:.85rem}
p.overview{margin:.8rem 0 -.3rem;font-weight:600}
"""


def esc(value: Any) -> str:
    """Text for HTML: control characters visible, escaped, quotes included (safe in
    attributes and element bodies)."""
    return quote.html_text(value)


FOLD_AT = 60  # a folding column's text longer than this folds behind a disclosure


def _cell(v: Any, column: Column | None = None) -> tuple[str, str]:
    """(css class, text) of one table cell."""
    col = column or Column("value")
    if isinstance(v, bool) and col.fmt == "choice":  # a decision, not a verdict: no colour
        return "", show(v, col.fmt)
    if isinstance(v, bool):
        return ("yes", "yes") if v else ("no", "NO")
    text = show(v, col.fmt)
    if v is None or text == "-":
        return "", text
    if isinstance(v, (int, float, Span)) or col.fmt in ("pct", "x", "span"):
        return "num", text
    if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v):
        return "num", text
    return "", text


def _td(v: Any, column: Column, src: Any) -> str:
    cls, text = _cell(v, column)
    attrs = f' class="{cls}"' if cls else ""
    if src:  # one JSON pointer, or a JSON list of them (an interval's two ends)
        attrs += f' data-src="{esc(src if isinstance(src, str) else json.dumps(list(src)))}"'
    body = esc(text)
    if column.fold and len(text) > FOLD_AT:
        body = f"<details><summary>{esc(text[: FOLD_AT - 20])}…</summary>{body}</details>"
    return f"<td{attrs}>{body}</td>"


def render_table(t: Table, limit: int = MAX_ROWS) -> str:
    """One table of ``report.tables``: every cell says where in report.json it comes from
    (``data-src``, a JSON pointer); wide tables scroll sideways, long text folds."""
    if not t.rows:
        return '<p class="muted">(none)</p>'
    head = "".join(f"<th>{esc(c.header)}</th>" for c in t.columns)
    body = [
        "<tr>" + "".join(_td(r.get(c.key), c, src.get(c.key)) for c in t.columns) + "</tr>"
        for r, src in zip(t.rows[:limit], t.sources[:limit], strict=True)
    ]
    more = ""
    if len(t.rows) > limit:
        more = f'<p class="muted">{len(t.rows) - limit} more rows in report.json</p>'
    return (
        f'<div class="scroll"><table data-table="{esc(t.key)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{more}"
    )


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Plain rows of cells (the environment's, the gate's) as a table."""
    t = Table("rows", "", [Column(c, fold=c in ("reason", "verdict")) for c in columns])
    for r in rows:
        t.add(dict(zip(columns, r, strict=True)))
    return render_table(t)


def verdict_box(lines: Sequence[verdicts.Line], tone: str | None = None) -> str:
    items = "".join(f'<li class="{ln.tone}">{esc(ln.text)}</li>' for ln in lines)
    return f'<div class="verdict {tone or verdicts.worst(list(lines))}"><ul>{items}</ul></div>'


def _environment(report: Envelope) -> str:
    env = report.environment
    rows = [
        ("device", access.device(report)),
        ("preset", access.preset(report)),
        ("ranks", access.ranks(report)),
        ("carrier", access.carrier(report)),
        ("commit", access.commit(report)),
        ("torch / CUDA", f"{env.torch} / {env.cuda}"),
        ("Python", env.python),
        ("platform", env.platform),
        ("kimi-bench", env.package_version),
        ("seed", env.seed),
        ("created", env.created),
    ]
    return table(("field", "value"), [(k, v) for k, v in rows if v is not None])


def _figure(fig: RenderedFigure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    return (
        f'<figure id="fig-{esc(fig.stem)}"><img alt="{esc(fig.title)}" '
        f'src="data:image/png;base64,{data}"><figcaption><b>{esc(fig.title)}.</b> '
        f"{esc(fig.about)}</figcaption></figure>"
    )


FOLD_ROWS = 40  # a longer table (a copy ledger) is folded behind a disclosure


def _tables(shown: Sequence[Table]) -> list[str]:
    out = []
    for t in shown:
        about = f'<p class="muted">{esc(t.about)}</p>' if t.about else ""
        body = render_table(t)
        if len(t.rows) > FOLD_ROWS:
            body = f"<details><summary>{len(t.rows)} rows</summary>{body}</details>"
        out.append(f'<h3 id="{esc(t.key)}">{esc(t.title)}</h3>{about}{body}')
    return out


def section(view: View, anchor: str, figures: Sequence[RenderedFigure]) -> str:
    """One report: its verdict lines first, the figures, the notes (noise warnings are a
    table after the figures), every table, the environment and the configuration."""
    typed = view.typed
    parts = [f'<section id="{esc(anchor)}"><h2>{esc(typed.kind)}</h2>']
    parts.append(verdict_box(view.lines))
    parts.append(f'<p class="muted">{esc(access.caption(typed))}</p>')
    if figures:
        parts.append("<h3>Figures</h3>" + "".join(_figure(f) for f in figures))
    if view.notes:
        items = "".join(f"<li>{esc(n)}</li>" for n in view.notes)
        parts.append(f'<h3>Notes</h3><ul class="notes">{items}</ul>')
    parts += _tables(view.tables)
    parts.append("<h3>Environment</h3>" + _environment(typed))
    config = json.dumps(view.data.get("config") or {}, indent=1, default=str)
    parts.append(f"<details><summary>Configuration</summary><pre>{esc(config)}</pre></details>")
    parts.append("</section>")
    return "\n".join(parts)


def _head(
    views: Sequence[View], anchors: list[str], title: str, gate: Sequence[RuleResult] | None
) -> list[str]:
    """The page's heading, its links and (several reports, or a gate) an overview of every
    report's verdict lines."""
    head = [f"<h1>{esc(title)}</h1>"]
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    head.append(f'<p class="muted">written {esc(stamp)}; data: the report.json files</p>')
    if gate is not None:
        head.append(verdict_box([gate_line(list(gate))]))
    pairs = list(zip(anchors, views, strict=True))
    links = "".join(f'<a href="#{esc(a)}">{esc(v.typed.kind)}</a>' for a, v in pairs)
    if gate is not None:
        links += '<a href="#gate">gate</a>'
    if len(views) > 1 or gate is not None:
        head.append(f"<nav>{links}</nav>")
        head += [
            f'<p class="overview"><a href="#{esc(a)}">{esc(v.typed.kind)}</a></p>'
            + verdict_box(v.lines)
            for a, v in pairs
        ]
    return head


def render_html(
    reports: Sequence[Report | View],
    *,
    title: str = "kimi-bench report",
    gate: Sequence[RuleResult] | None = None,
    figures: Sequence[Sequence[RenderedFigure]] | None = None,
) -> str:
    """The page as a string. ``figures[i]`` are report i's figures when already rendered;
    otherwise they are drawn here (none without matplotlib)."""
    views = [r if isinstance(r, View) else view_of(r) for r in reports]
    figs = list(figures) if figures is not None else [figures_png(v.data) for v in views]
    anchors = [f"{v.typed.kind}-{i}" for i, v in enumerate(views)]
    head = _head(views, anchors, title, gate)
    figs += [[]] * (len(views) - len(figs))
    body = [section(v, a, f) for v, a, f in zip(views, anchors, figs, strict=False)]
    if gate is not None:
        cols = ("report", "rule", "measured", "limit", "verdict", "reason")
        rows = [(g.report, g.rule, g.measured, g.limit, g.verdict, g.reason) for g in gate]
        body.append(f'<section id="gate"><h2>gate</h2>{table(cols, rows)}</section>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>\n"
        + "\n".join(head + body)
        + "\n</main></body></html>\n"
    )


def write_html(
    reports: Sequence[Report | View],
    out_path: str | Path,
    *,
    title: str = "kimi-bench report",
    gate: Sequence[RuleResult] | None = None,
    figures: Sequence[Sequence[RenderedFigure]] | None = None,
) -> Path:
    """Write the page atomically (temp file + rename; no temp file left on failure)."""
    text = render_html(reports, title=title, gate=gate, figures=figures)
    return atomic_write_text(Path(out_path), text)
