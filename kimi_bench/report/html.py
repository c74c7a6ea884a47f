"""One self-contained HTML page per run: verdicts, environment, notes, figures (embedded
as base64 PNG), summary and result tables, gate verdicts.

The page has no external reference of any kind (no CSS, script, font or image URL), so it
opens from the file system with no server and no network. Every string that comes from
a report, a file name or the user is escaped with :func:`html.escape`.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kimi_bench.report import access
from kimi_bench.report.figbase import RenderedFigure
from kimi_bench.report.figures import figures_png

Dict = dict[str, Any]
MAX_ROWS = 500  # rows per table on the page; report.json keeps all of them

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d1d1f;
background:#fafafa;line-height:1.45}
main{max-width:1500px;margin:0 auto;padding:1rem 2rem 3rem}
h1{margin:.6rem 0}h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2.4rem}
h3{margin:1.4rem 0 .4rem}
.verdict{padding:.6rem .9rem;border-radius:6px;font-weight:600;margin:.6rem 0}
.ok{background:#e3f4e8;border-left:6px solid #1b9e77}
.bad{background:#fde8e8;border-left:6px solid #c0392b}
.info{background:#eef3fa;border-left:6px solid #5b7db1}
table{border-collapse:collapse;font-size:.85rem;margin:.4rem 0 1rem;background:#fff}
th,td{border:1px solid #d8d8d8;padding:.22rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap}
td.yes{color:#137a4f;font-weight:600}td.no{color:#b02a1e;font-weight:700}
.scroll{overflow-x:auto}
figure{margin:1rem 0 1.6rem;background:#fff;border:1px solid #e2e2e2;padding:.6rem}
figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:.85rem;color:#444;margin-top:.4rem}
ul.notes li{margin:.2rem 0}
nav a{margin-right:1rem}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.8rem}
pre{background:#fff;border:1px solid #e2e2e2;padding:.6rem;overflow-x:auto}
.muted{color:#666;font-size:.85rem}
"""


def esc(value: Any) -> str:
    """Text for HTML: escaped, quotes included (safe in attributes and element bodies)."""
    return html.escape(str(value), quote=True)


def _cell(v: Any) -> tuple[str, str]:
    """(css class, text) of one table cell."""
    if v is None:
        return "", "-"
    if isinstance(v, bool):
        return ("yes", "yes") if v else ("no", "NO")
    if isinstance(v, int):
        return "num", str(v)
    if isinstance(v, float):
        return "num", f"{v:.4g}"
    if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v):
        return "num", "x".join(str(x) for x in v)
    if isinstance(v, (dict, list, tuple)):
        return "", json.dumps(v, default=str)
    return "", str(v)


def table(rows: Sequence[Dict], columns: Sequence[str] | None = None, limit: int = MAX_ROWS) -> str:
    if not rows:
        return '<p class="muted">(none)</p>'
    cols = list(columns) if columns else list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = []
    for r in rows[:limit]:
        cells = []
        for c in cols:
            cls, text = _cell(r.get(c))
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{esc(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = ""
    if len(rows) > limit:
        more = f'<p class="muted">{len(rows) - limit} more rows in report.json</p>'
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{more}"
    )


def status(report: Dict) -> str:
    """'bad' when the report says something failed (error, a non-identical output, failed
    requests), else 'ok'. Only explicit fields are read; the verdict text is not parsed."""
    s = report.get("summary") or {}
    if s.get("error"):
        return "bad"
    for key in ("all_bit_exact_fp32", "all_bit_exact_bf16", "bit_exact_all_repeats"):
        if s.get(key) is False:
            return "bad"
    if isinstance(s.get("failed_requests"), int) and s["failed_requests"] > 0:
        return "bad"
    if isinstance(s.get("errors"), int) and s["errors"] > 0:
        return "bad"
    return "ok"


def _environment(report: Dict) -> str:
    env = report.get("environment") or {}
    rows = [
        ("device", access.device(report)),
        ("preset", access.preset(report)),
        ("ranks", access.ranks(report)),
        ("carrier", access.carrier(report)),
        ("commit", access.commit(report)),
        ("torch / CUDA", f"{env.get('torch')} / {env.get('cuda')}"),
        ("Python", env.get("python")),
        ("platform", env.get("platform")),
        ("kimi-bench", env.get("package_version")),
        ("seed", env.get("seed")),
        ("created", env.get("created")),
    ]
    return table([{"field": k, "value": v} for k, v in rows if v is not None])


def _summary_rows(report: Dict) -> list[Dict]:
    rows = []
    for k, v in (report.get("summary") or {}).items():
        if k in ("verdict",):
            continue
        if isinstance(v, dict):
            rows += [{"metric": f"{k}.{kk}", "value": vv} for kk, vv in v.items()]
        else:
            rows.append({"metric": k, "value": v})
    return rows


def _ab_rows(report: Dict) -> list[Dict]:
    rows = []
    for rate, metrics in (report.get("ab") or {}).items():
        if not isinstance(metrics, dict):
            continue
        for name, m in metrics.items():
            if not isinstance(m, dict):
                continue
            ci = m.get("ci95")
            delta = access.number(m.get("delta"))
            rows.append(
                {
                    "rate": rate,
                    "metric": name,
                    "delta": None if delta is None else f"{delta:+.1%}",
                    "95% interval": (
                        f"{ci[0]:+.1%} .. {ci[1]:+.1%}"
                        if isinstance(ci, list) and len(ci) == 2 and None not in ci
                        else None
                    ),
                    "significant": m.get("significant"),
                    "method": m.get("method"),
                }
            )
    return rows


def _control(report: Dict) -> str:
    """micro: the control plane and each arm's payload cost, the emulation-only stages
    named apart ('' for other reports and micro reports without control rounds)."""
    ctl = report.get("control")
    if not isinstance(ctl, dict) or not ctl.get("rows"):
        return ""
    apart = [e for e in ctl.get("emulation_only") or [] if e.get("kind") == "emulation_only"]
    items = "".join(f"<li><b>{esc(e.get('stage'))}</b>: {esc(e.get('why'))}</li>" for e in apart)
    only = f'<p>Emulation-only stages (shown apart):</p><ul class="notes">{items}</ul>'
    return (
        "<h3>Control plane and payload cost</h3>"
        f'<p class="muted">control: every arm with {esc(ctl.get("payload_images"))}; '
        "payload cost = arm minus its control (ms), interval over both sides</p>"
        + (only if apart else "")
        + table(ctl["rows"])
    )


def _figure(fig: RenderedFigure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    return (
        f'<figure id="fig-{esc(fig.stem)}"><img alt="{esc(fig.title)}" '
        f'src="data:image/png;base64,{data}"><figcaption><b>{esc(fig.title)}.</b> '
        f"{esc(fig.about)}</figcaption></figure>"
    )


def section(report: Dict, anchor: str, figures: Sequence[RenderedFigure]) -> str:
    kind = access.kind(report)
    parts = [f'<section id="{esc(anchor)}"><h2>{esc(kind)}</h2>']
    parts.append(f'<div class="verdict {status(report)}">{esc(access.verdict(report))}</div>')
    parts.append(f'<p class="muted">{esc(access.caption(report))}</p>')
    if access.notes(report):
        items = "".join(f"<li>{esc(n)}</li>" for n in access.notes(report))
        parts.append(f'<h3>Notes</h3><ul class="notes">{items}</ul>')
    if figures:
        parts.append("<h3>Figures</h3>" + "".join(_figure(f) for f in figures))
    parts.append("<h3>Summary</h3>" + table(_summary_rows(report), ["metric", "value"]))
    if report.get("ab"):
        parts.append("<h3>A/B deltas (deferred vs eager)</h3>" + table(_ab_rows(report)))
    parts.append("<h3>Results</h3>" + table(report.get("results") or []))
    parts.append(_control(report))
    parts.append("<h3>Environment</h3>" + _environment(report))
    config = json.dumps(report.get("config") or {}, indent=1, default=str)
    parts.append(f"<details><summary>Configuration</summary><pre>{esc(config)}</pre></details>")
    parts.append("</section>")
    return "\n".join(parts)


def render_html(
    reports: Sequence[Any],
    *,
    title: str = "kimi-bench report",
    gate: Sequence[Dict] | None = None,
    figures: Sequence[Sequence[RenderedFigure]] | None = None,
) -> str:
    """The page as a string. ``figures[i]`` are report i's figures when already rendered;
    otherwise they are drawn here (none without matplotlib)."""
    dicts = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in reports]
    figs = list(figures) if figures is not None else [figures_png(d) for d in dicts]
    anchors = [f"{access.kind(d)}-{i}" for i, d in enumerate(dicts)]
    head = [f"<h1>{esc(title)}</h1>"]
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    head.append(f'<p class="muted">written {esc(stamp)}; data: the report.json files</p>')
    if gate is not None:
        failed = [g for g in gate if g.get("verdict") == "fail"]
        word = f"FAIL: {len(failed)} of {len(gate)} rules" if failed else "PASS"
        head.append(f'<div class="verdict {"bad" if failed else "ok"}">gate {esc(word)}</div>')
    links = "".join(
        f'<a href="#{esc(a)}">{esc(access.kind(d))}</a>'
        for a, d in zip(anchors, dicts, strict=True)
    )
    if gate is not None:
        links += '<a href="#gate">gate</a>'
    head.append(f"<nav>{links}</nav>")
    overview = [
        {"report": access.kind(d), "verdict": access.verdict(d), "status": status(d)} for d in dicts
    ]
    head.append(table(overview))
    figs += [[]] * (len(dicts) - len(figs))
    body = [section(d, a, f) for d, a, f in zip(dicts, anchors, figs, strict=False)]
    if gate is not None:
        cols = ["report", "rule", "measured", "limit", "verdict", "reason"]
        body.append(f'<section id="gate"><h2>gate</h2>{table(list(gate), cols)}</section>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>\n"
        + "\n".join(head + body)
        + "\n</main></body></html>\n"
    )


def write_html(
    reports: Sequence[Any],
    out_path: str | Path,
    *,
    title: str = "kimi-bench report",
    gate: Sequence[Dict] | None = None,
    figures: Sequence[Sequence[RenderedFigure]] | None = None,
) -> Path:
    """Write the page atomically (temp file + rename; no temp file left on failure)."""
    path = Path(out_path)
    text = render_html(reports, title=title, gate=gate, figures=figures)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
