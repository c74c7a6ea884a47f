"""Every HTML report kind opened in headless Chromium as a reader opens it (issue 19 item 7):
no console error, every figure decodes, nothing is fetched from outside the page, the
verdict is on the first screen. One screenshot per kind is kept under ``$KB_ARTIFACTS/
browser`` (``.ci/run`` sets it; a temp folder otherwise). Skipped, with the reason, where
Debian's chromium or the playwright package is missing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.chromium import check_page, chromium, page_verdicts, unavailable
from tests.browser.pages import PARTIAL_ERROR, build_pages

# renders every kind's figures, then a browser; one worker builds the pages once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

KINDS = [
    "parity",
    "micro",
    "serve-ab",
    "serve-ab-partial",
    "serve-ab-endpoints",
    "project",
    "run-index",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = unavailable()
    if why:
        pytest.skip(f"no headless Chromium: {why}")
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def pages(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_pages(tmp_path_factory.mktemp("pages"))


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = os.environ.get("KB_ARTIFACTS")
    folder = Path(root) / "browser" if root else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("kind", KINDS)
def test_the_report_page_reads_cleanly_in_chromium(
    kind: str, browser: Any, pages: dict[str, Path], shots: Path
) -> None:
    page = pages[kind]
    verdicts = page_verdicts(page)
    assert verdicts, f"{kind}: no report verdict found beside {page}"
    res = check_page(browser, page, verdicts, shots / f"{kind}.png")
    assert res.problems == [], f"{kind} ({page}):\n" + "\n".join(res.problems)
    assert res.images >= 1, f"{kind}: no figure on the page"
    assert res.screenshot is not None and res.screenshot.stat().st_size > 0
    if kind == "serve-ab-partial":
        assert any(PARTIAL_ERROR in v for v in verdicts)


def test_the_check_sees_what_a_reader_would_see_go_wrong(browser: Any, tmp_path: Path) -> None:
    """A page with an external image, a broken embedded image, a script error and its
    verdict below the fold: every one is reported, and the external request never leaves."""
    page = tmp_path / "report.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
        "<div style='height:2000px'>tall notes</div>"
        "<div class='verdict'>BIT-IDENTICAL: 2 of 2</div>"
        "<img alt='external' src='http://kimi-bench.invalid/figure.png'>"
        "<img alt='broken' src='data:image/png;base64,AAAA'>"
        "<script>console.error('boom'); undefinedFunction();</script>"
        "</body></html>"
    )
    res = check_page(browser, page, ["BIT-IDENTICAL: 2 of 2"])
    text = "\n".join(res.problems)
    assert res.blocked == ["http://kimi-bench.invalid/figure.png"]
    assert "request leaving the page: http://kimi-bench.invalid/figure.png" in text
    assert "image does not decode: 'external'" in text
    assert "image does not decode: 'broken'" in text
    assert "console error: boom" in text
    assert "page error:" in text and "undefinedFunction" in text
    assert "the verdict box is not inside the first screen" in text
    assert "verdict not on the first screen: 'BIT-IDENTICAL: 2 of 2'" in text


def test_the_check_sees_an_empty_cell_where_the_json_has_a_number(
    browser: Any, tmp_path: Path
) -> None:
    """The A/B table once showed '-' in every cell while report.json held the numbers, and
    this check passed it: a page that does so now fails, naming the value it hides."""
    import json
    import shutil

    from tests.browser.pages import CPU_RUN

    shutil.copy2(CPU_RUN / "serve-ab" / "report.json", tmp_path / "report.json")
    rep = json.loads((tmp_path / "report.json").read_text())
    rate = next(iter(rep["ab"]))
    src = f"/ab/{rate}/deferred/median_ttft/delta_pct"
    page = tmp_path / "report.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
        f"<section id='serve-ab-0'><div class='verdict'>x</div><table><tr>"
        f"<td data-src='{src}'>-</td></tr></table></section></body></html>"
    )
    res = check_page(browser, page, [])
    assert any(src in p and "shows '-'" in p for p in res.problems), res.problems
