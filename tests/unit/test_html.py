"""The HTML page: parses, embeds every figure, refers to nothing outside itself, escapes
every string from a report."""

from __future__ import annotations

import base64
import copy
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kimi_bench.report import html as page
from kimi_bench.report import verdicts
from kimi_bench.report.figbase import RenderedFigure
from kimi_bench.report.gate_verdict import RuleResult
from kimi_bench.report.table import Column

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "reports" / "examples" / "cpu-run"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HOSTILE = '<script>alert("x")</script> [/tmp/x] [red]y.png "><img src=http://evil/x>'


class Page(HTMLParser):
    """Collects tags with their attributes, the text, and whether the tags balance."""

    VOID: ClassVar[set[str]] = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []
        self.unbalanced: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.unbalanced.append(tag)
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def of(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def parse(text: str) -> Page:
    p = Page()
    p.feed(text)
    p.close()
    assert not p.unbalanced and not p.stack, (p.unbalanced, p.stack)
    return p


def load(kind: str) -> dict[str, Any]:
    return json.loads((EXAMPLE / kind / "report.json").read_text())


def fake_figures(n: int, stem: str = "fig") -> list[RenderedFigure]:
    png = PNG_MAGIC + b"\x00" * 16  # not drawn: the page only carries the bytes
    return [RenderedFigure(f"{stem}{i}", f"title {i}", "about", png) for i in range(n)]


def assert_self_contained(p: Page, raw: str) -> None:
    for tag, attrs in p.tags:
        for name in ("src", "href", "srcset", "action", "data", "poster"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(("#", "data:image/png;base64,")), (tag, name, value)
    assert not p.of("script") and not p.of("link") and not p.of("iframe")
    assert "url(" not in raw and "@import" not in raw


def run_page(tmp_path: Path, figures: list[list[RenderedFigure]] | None) -> Page:
    reports = [load("parity"), load("micro"), load("serve-ab")]
    gate = [RuleResult("micro.speedup_median >= 1.2", 1.8, 1.2, "pass", "ok", "micro")]
    out = page.write_html(reports, tmp_path / "index.html", gate=gate, figures=figures)
    raw = out.read_text()
    p = parse(raw)
    imgs = p.of("img")
    assert len(imgs) == 1 + 3 + 4  # parity grid; micro stages+timeline+payload; four serve-ab
    for img in imgs:
        src = img["src"] or ""
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
        assert img.get("alt")
    assert_self_contained(p, raw)
    ids = {a.get("id") for _, a in p.tags}
    assert {"parity-0", "micro-1", "serve-ab-2", "gate"} <= ids
    assert {a["href"] for a in p.of("a")} == {"#parity-0", "#micro-1", "#serve-ab-2", "#gate"}
    text = " ".join(p.text)
    for rep in reports:
        for line in verdicts.lines(rep):
            assert line.text in text
    assert "gate PASS" in text and "micro.speedup_median >= 1.2" in text
    assert [f.name for f in tmp_path.iterdir()] == ["index.html"]  # no temp file left
    return p


def test_run_page_embeds_given_figures_and_is_self_contained(tmp_path: Path) -> None:
    from kimi_bench.report.figures import FIGURES

    given = [fake_figures(len(FIGURES[k]), k) for k in ("parity", "micro", "serve-ab")]
    p = run_page(tmp_path, given)
    assert [a["id"] for a in p.of("figure")] == [f"fig-{f.stem}" for fs in given for f in fs]


@pytest.mark.slow
def test_run_page_draws_every_figure(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    p = run_page(tmp_path, None)
    stems = [a["id"] for a in p.of("figure")]
    assert stems == [
        "fig-parity_grid",
        "fig-stages",
        "fig-timeline",
        "fig-payload",
        "fig-ttft_vs_rate",
        "fig-throughput",
        "fig-ttft_cdf",
        "fig-stage_waterfall",
    ]


def test_every_user_string_is_escaped(tmp_path: Path) -> None:
    rep = load("parity")
    rep["notes"] = [HOSTILE]
    rep["summary"]["verdict"] = HOSTILE
    rep["results"][0]["name"] = HOSTILE
    rep["config"]["images"] = HOSTILE
    rep["environment"]["device_name"] = HOSTILE
    raw = page.render_html([rep], title=HOSTILE, figures=[fake_figures(2)])
    p = parse(raw)
    assert len(p.of("img")) == 2  # only the two figures: the hostile <img> stayed text
    assert_self_contained(p, raw)
    text = "".join(p.text)
    assert text.count(HOSTILE) >= 4  # title, verdict, note, result cell (printed literally)
    assert "<script>" not in raw


def test_gate_fail_and_bad_status_are_marked() -> None:
    rep = load("parity")
    rep["summary"]["all_bit_exact_bf16"] = False
    gate = [RuleResult("r", 1, 0, "fail", "x")]
    p = parse(page.render_html([rep], gate=gate, figures=[[]]))
    classes = [a.get("class") for t, a in p.tags if t == "div"]
    assert "verdict bad" in classes
    assert "gate FAIL: 1 of 1 rules" in " ".join(p.text)


def status(report: dict[str, Any]) -> str:
    """The tone of the report's verdict box: its worst verdict line's."""
    return verdicts.worst(verdicts.lines(report))


def test_status_follows_the_data() -> None:
    died, mismatch, serve = load("micro"), load("micro"), load("serve-ab")
    died["summary"]["error"] = "rank 3 died"
    mismatch["summary"]["bit_exact_all_repeats"] = False
    serve["summary"]["failed_requests"] = 2
    assert status(died) == "bad"
    assert status(mismatch) == "bad"
    assert status(serve) == "bad"
    assert status(load("parity")) == "good"
    assert status(load("micro")) == "unresolved"  # zero-copy vs deferred spans 1


def test_long_tables_are_capped_with_a_pointer_to_the_json() -> None:
    rep = load("parity")
    row = rep["results"][0]
    rep["results"] = [dict(copy.deepcopy(row), name=f"img{i}") for i in range(page.MAX_ROWS + 7)]
    raw = page.render_html([rep], figures=[[]])
    assert "7 more rows in report.json" in raw
    assert "img0" in raw and f"img{page.MAX_ROWS + 6}" not in raw


def test_cells_keep_shapes_and_numbers_whole() -> None:
    assert page._cell([1, 10, 20]) == ("num", "1x10x20")
    assert page._cell(0.0078431372) == ("num", "0.007843")
    assert page._cell(False) == ("no", "NO")  # a failed check: red
    # a decision (parity's deferred: the input stays eager by design): plain, not red
    assert page._cell(False, Column("deferred", fmt="choice")) == ("", "no")
    assert page._cell(True, Column("deferred", fmt="choice")) == ("", "yes")
    assert page._cell(None) == ("", "-")
    assert page._cell({"a": [1]}) == ("", '{"a": [1]}')


def test_page_without_matplotlib_still_has_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    from kimi_bench.report import figures

    monkeypatch.setattr(figures, "pyplot", lambda: None)
    p = parse(page.render_html([load("micro")]))
    assert not p.of("img")
    assert len(p.of("table")) >= 3  # overview, summary, results, environment
