"""Every committed report, rendered: each HTML table cell shows the value its report.json
holds there (issue 28). The page marks each cell with the JSON pointer of its value
(``data-src``); this test reads report.json itself, holds every marked cell against it,
and, per kind, walks the JSON on its own to require the cells a reader looks for (every
A/B delta, every stage median, every parity flag, every summary number): a cell showing
``-`` where the JSON has a number fails, and so does a number the page does not show."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from kimi_bench.report import html as page
from kimi_bench.report.model import load_report
from kimi_bench.report.table import pointer, resolve
from kimi_bench.report.view import view_of
from kimi_bench.report.writers import render_markdown
from tests.committed import committed_reports, raw_report

REPO = Path(__file__).resolve().parents[2]
COMMITTED = committed_reports()
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


class Cells(HTMLParser):
    """Every ``<td>`` of every ``<table data-table=...>``: (table key, pointer, text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.table: str | None = None
        self.cell: dict[str, Any] | None = None
        self.cells: list[tuple[str, str | None, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.table = a.get("data-table")
        elif tag == "td":
            self.cell = {"src": a.get("data-src"), "text": []}

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.cell is not None:
            text = "".join(self.cell["text"]).strip()
            self.cells.append((str(self.table), self.cell["src"], text))
            self.cell = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell["text"].append(data)


def cells_of(report: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    parser = Cells()
    parser.feed(page.render_html([report], figures=[[]]))
    return parser.cells


def pointers(src: str) -> list[str]:
    return json.loads(src) if src.startswith("[") else [src]


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def close(shown: float, value: float) -> bool:
    """The page writes 4 significant digits, ratios 3, percentages 1 decimal."""
    return abs(shown - value) <= 0.051 + 0.006 * abs(value)


def check_cell(report: dict[str, Any], src: str, text: str) -> None:
    values = [resolve(report, p) for p in pointers(src)]
    where = f"{src}: shows {text!r}, report.json holds {values!r}"
    if all(finite(v) for v in values):
        assert text != "-", where
        # a folded cell shows its start, then the whole text: the last numbers are its own
        shown = [float(x) for x in NUMBER.findall(text.replace("x", " "))][: len(values)]
        assert len(shown) == len(values), where
        assert all(close(s, v) for s, v in zip(shown, values, strict=True)), where
    elif len(values) == 1 and isinstance(values[0], bool):
        # a decision (parity's deferred) reads "no", a failed check "NO"
        no = "no" if src.endswith("/deferred") else "NO"
        assert text == ("yes" if values[0] else no), where
    elif len(values) == 1 and isinstance(values[0], str):
        assert values[0].replace("\n", " ") in text or text.startswith(values[0][:30]), where
    elif all(v is None for v in values):
        assert text == "-", where


def marked(cells: list[tuple[str, str | None, str]]) -> dict[str, str]:
    """pointer -> the text of the cell that shows it (every pointer a cell names)."""
    out = {}
    for _, src, text in cells:
        for p in pointers(src) if src else []:
            out[p] = text
    return out


def expected_pointers(report: dict[str, Any]) -> list[str]:
    """What a reader must find on the page, read from the JSON without the page's code."""
    want = [pointer("summary", k) for k, v in report["summary"].items() if finite(v)]
    kind = report["kind"]
    if kind == "serve-ab":
        for rate, per_arm in (report.get("ab") or {}).items():
            for arm, metrics in per_arm.items():
                for metric, m in metrics.items():
                    if isinstance(m, dict) and finite(m.get("delta_pct")):
                        want.append(pointer("ab", rate, arm, metric, "delta_pct"))
        for i, row in enumerate(report["results"]):
            want += [pointer("results", i, k) for k in ("ttft_median_ms", "req_per_s")
                     if finite(row.get(k))]  # fmt: skip
    elif kind == "micro":
        for arm, block in report["arms"].items():
            for stage, st in block["stages"].items():
                if finite((st.get("summary_ms") or {}).get("median")):
                    want.append(pointer("arms", arm, "stages", stage, "summary_ms", "median"))
            if finite((block.get("total_ms") or {}).get("median")):
                want.append(pointer("arms", arm, "total_ms", "median"))
        for key, m in (report.get("speedups") or {}).items():
            want.append(pointer("speedups", key, "median"))
            if finite((m.get("interval") or {}).get("low")):
                want.append(pointer("speedups", key, "interval", "low"))
        for key in (report.get("control") or {}).get("payload_speedups") or {}:
            want.append(pointer("control", "payload_speedups", key, "median"))
    elif kind == "parity":
        for i, row in enumerate(report["results"]):
            want += [pointer("results", i, k) for k in ("bit_exact_fp32", "bit_exact_bf16")
                     if isinstance(row.get(k), bool)]  # fmt: skip
    elif kind == "project":
        for i, row in enumerate(report.get("totals") or []):
            want += [pointer("totals", i, k) for k in ("speedup", "deferred_ms") if k in row]
    return want


def test_every_committed_kind_is_covered() -> None:
    kinds = {raw_report(p)["kind"] for p in COMMITTED}
    assert kinds == {"parity", "micro", "serve-ab", "project"}


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.parent.relative_to(REPO)))
def test_every_html_cell_equals_report_json(path: Path) -> None:
    report = load_report(path).to_dict()
    cells = cells_of(report)
    assert cells, "no table cell on the page"
    for _, src, text in cells:
        if src:
            check_cell(report, src, text)
    shown = marked(cells)
    missing = [p for p in expected_pointers(report) if p not in shown]
    assert not missing, f"{len(missing)} values of report.json not on the page: {missing[:5]}"
    for p in expected_pointers(report):
        value = resolve(report, p)
        if finite(value):
            assert shown[p] != "-", f"{p}: '-' where report.json holds {value}"


def test_serve_ab_table_shows_every_delta_and_its_interval() -> None:
    """The table that showed '-' everywhere: rate 4's +37.3% style numbers are there."""
    path = REPO / "reports" / "baselines" / "h200" / "serve-ab" / "r8-shm"
    report = load_report(path).to_dict()
    ab = [(src, text) for key, src, text in cells_of(report) if key == "serve.ab" and src]
    med = report["ab"]["inf"]["deferred"]["median_ttft"]
    by = dict(ab)
    assert by["/ab/inf/deferred/median_ttft/delta_pct"] == f"{med['delta_pct']:+.1f}%"
    lo, hi = med["interval"]["low"], med["interval"]["high"]
    both = json.dumps(["/ab/inf/deferred/median_ttft/interval/low",
                       "/ab/inf/deferred/median_ttft/interval/high"])  # fmt: skip
    assert by[both] == f"{lo:+.1f}% .. {hi:+.1f}% (95% CI)"
    assert not [t for _, t in ab if t == "-"]


def test_markdown_shows_the_numbers_the_page_shows() -> None:
    """report.md and the page print the same tables: each marked cell's text is in the
    Markdown too (the same formatter writes both)."""
    path = REPO / "reports" / "baselines" / "h200" / "serve-ab" / "r8-pickle"
    report = load_report(path).to_dict()
    md = render_markdown(view_of(report))
    for key, src, text in cells_of(report):
        if key == "serve.ab" and src:
            assert text in md.replace("\\|", "|"), text
