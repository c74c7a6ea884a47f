"""Open a kimi-bench HTML page in headless Chromium (Debian's ``chromium`` package, driven by
Playwright for Python; no browser download) and list what a reader would see go wrong:

- a console error or an uncaught page error;
- an ``<img>`` that does not decode (``naturalWidth`` 0 after ``img.decode()``);
- a request that leaves the page: anything but ``data:`` URLs and the page's own file is
  recorded and aborted, so nothing reaches the network;
- a verdict that is not visible in the first viewport (1280x800): the page's first
  ``.verdict`` box must lie inside it, non-empty, and every report's verdict lines must be
  on the first screen (in that box or the overview's boxes);
- a table cell that says ``-`` where the report.json it shows holds a number (each cell
  names its value's JSON pointer, ``data-src``): the empty A/B table this check once
  passed.

``python tests/browser/chromium.py PAGE_OR_FOLDER... --screenshots DIR`` checks every
``report.html`` / ``index.html`` given or found below the folders (exit 1 on a problem;
exit 0 with the reason printed where Chromium or playwright is missing); ``.ci/run`` runs
it on the pages its README commands and its main job wrote.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 800}
PAGE_NAMES = ("report.html", "index.html")

_IMAGES_JS = """async () => Promise.all(Array.from(document.images).map(async (img) => {
  try { await img.decode(); } catch (e) {}
  return {alt: img.alt, width: img.naturalWidth, complete: img.complete};
}))"""

_FOLD_JS = """() => {
  const fold = window.innerHeight;
  const seen = [];
  for (const el of document.querySelectorAll('.verdict, table')) {
    const r = el.getBoundingClientRect();
    if (r.top < fold && r.bottom > 0 && r.width > 0 && r.height > 0) {
      seen.push(el.innerText);
    }
  }
  const first = document.querySelector('.verdict');
  const box = first ? first.getBoundingClientRect() : null;
  const style = first ? getComputedStyle(first) : null;
  return {
    fold: fold,
    first: first ? first.innerText.trim() : null,
    first_top: box ? box.top : null,
    first_bottom: box ? box.bottom : null,
    first_visible: !!(style && style.visibility !== 'hidden' && style.display !== 'none'),
    seen: seen.join('\\n'),
  };
}"""


_CELLS_JS = """() => Array.from(document.querySelectorAll('section')).flatMap(sec =>
  Array.from(sec.querySelectorAll('td[data-src]')).map(td =>
    [sec.id, td.getAttribute('data-src'), td.innerText.trim()]))"""


def unavailable() -> str | None:
    """Why the check cannot run here (None when it can)."""
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is missing (Debian: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; no browser download)"
    return None


@dataclass
class PageCheck:
    page: Path
    problems: list[str] = field(default_factory=list)
    images: int = 0
    blocked: list[str] = field(default_factory=list)
    screenshot: Path | None = None


@contextmanager
def chromium() -> Iterator[Any]:
    """One headless Chromium for several pages."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def check_page(
    browser: Any, page_path: Path, verdicts: list[str], screenshot: Path | None = None
) -> PageCheck:
    """Open ``page_path``; ``verdicts``: each report's verdict text, all expected on the
    first screen."""
    url = page_path.resolve().as_uri()
    out = PageCheck(page_path)
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=True)
    page = context.new_page()
    page.on(
        "console",
        lambda m: out.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: out.problems.append(f"page error: {e}"))

    def own(target: str) -> bool:
        return target.startswith("data:") or target == url

    def route(r: Any) -> None:  # every request: the page's own file and data: URLs only
        if own(r.request.url):
            r.continue_()
        else:
            out.blocked.append(r.request.url)
            r.abort()

    def seen(req: Any) -> None:  # also what does not pass through routing
        if not own(req.url):
            out.blocked.append(req.url)

    page.route("**/*", route)
    page.on("request", seen)
    try:
        page.goto(url, wait_until="load")
        images = page.evaluate(_IMAGES_JS)
        out.images = len(images)
        out.problems += [
            f"image does not decode: {i['alt']!r}" for i in images if not i["width"] > 0
        ]
        out.problems += _fold_problems(page.evaluate(_FOLD_JS), verdicts)
        out.problems += _empty_cells(page.evaluate(_CELLS_JS), page_reports(page_path))
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot))
            out.screenshot = screenshot
    finally:
        context.close()
    out.blocked = sorted(set(out.blocked))
    out.problems += [f"request leaving the page: {u}" for u in out.blocked]
    return out


def _fold_problems(fold: dict[str, Any], verdicts: list[str]) -> list[str]:
    if not fold["first"]:
        return ["no verdict on the page (no non-empty .verdict element)"]
    problems = []
    if not fold["first_visible"] or fold["first_top"] < 0 or fold["first_bottom"] > fold["fold"]:
        problems.append(
            f"the verdict box is not inside the first screen (top {fold['first_top']:.0f}, "
            f"bottom {fold['first_bottom']:.0f}, fold {fold['fold']})"
        )
    seen = " ".join(fold["seen"].split())
    for v in verdicts:
        if " ".join(v.split()) not in seen:
            problems.append(f"verdict not on the first screen: {v[:120]!r}")
    return problems


def page_reports(page_path: Path) -> dict[str, dict[str, Any]]:
    """kind -> the report a page shows (report.json beside a report.html; the subfolders'
    beside an index.html), in the current layout."""
    from kimi_bench.report.files import read_raw as raw_report
    from kimi_bench.report.model import Report

    out = {}
    for f in _page_report_files(page_path):
        if f.is_file():
            rep = Report.from_dict(raw_report(f)).to_dict()
            out[str(rep.get("kind"))] = rep
    return out


def _empty_cells(cells: list[list[str]], reports: dict[str, dict[str, Any]]) -> list[str]:
    """Cells that say ``-`` where their report.json holds a number."""
    import json
    import math

    from kimi_bench.report.table import resolve

    problems = []
    for section, src, text in cells:
        rep = reports.get(section.rsplit("-", 1)[0])
        if rep is None or text != "-":
            continue
        ptrs = json.loads(src) if src.startswith("[") else [src]
        try:
            values = [resolve(rep, p) for p in ptrs]
        except (KeyError, IndexError, ValueError, TypeError):
            continue
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in values):  # fmt: skip
            problems.append(f"table cell shows '-' where report.json holds {values} ({src})")
    return problems[:10]


def page_verdicts(page_path: Path) -> list[str]:
    """The verdict of every report a page shows: report.json beside a report.html, or the
    report.json of each subfolder beside an index.html."""
    from kimi_bench.report.files import read_raw

    out = []
    for f in _page_report_files(page_path):
        if f.is_file():
            out += verdict_texts(read_raw(f))
    return out


def _page_report_files(page_path: Path) -> list[Path]:
    """The report files a page shows (report.json or report.json.gz: ``report.files``)."""
    from kimi_bench.report.files import report_file

    folder = page_path.parent
    if page_path.name == "index.html":
        return [report_file(d) for d in sorted(folder.iterdir()) if d.is_dir()]
    return [report_file(folder)] if page_path.name == "report.html" else []


def verdict_texts(report: dict[str, Any]) -> list[str]:
    """The verdict lines the page shows for a report (``kimi_bench.report.verdicts``: the
    data's words, not the summary string an older report was written with)."""
    from kimi_bench.report import verdicts
    from kimi_bench.report.model import Report

    return [line.text for line in verdicts.lines(Report.from_dict(report).to_dict())]


def find_pages(paths: list[Path], newer_than: Path | None = None) -> list[Path]:
    """The pages given, and those found below the folders given (only those modified after
    ``newer_than``, when set: what a run wrote, not the copies it was handed)."""
    since = newer_than.stat().st_mtime if newer_than else None
    pages: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for name in PAGE_NAMES for q in p.rglob(name))
            pages += [q for q in found if since is None or q.stat().st_mtime > since]
        else:
            pages.append(p)
    return pages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Check kimi-bench HTML pages in headless Chromium.")
    ap.add_argument("paths", nargs="+", type=Path, help="pages, or folders to search")
    ap.add_argument("--screenshots", type=Path, help="write a screenshot per page here")
    ap.add_argument("--newer-than", type=Path, help="in folders: only pages newer than this")
    args = ap.parse_intermixed_args(argv)
    why = unavailable()
    if why:
        print(f"browser check skipped: {why}")
        return 0
    pages = find_pages(args.paths, args.newer_than)
    bad = 0
    with chromium() as browser:
        for n, page in enumerate(pages):
            shot = None
            if args.screenshots:
                name = f"{n:02d}_" + "_".join(page.parts[-3:-1]) + f"_{page.stem}.png"
                shot = args.screenshots / name
            res = check_page(browser, page, page_verdicts(page), shot)
            state = "ok" if not res.problems else "PROBLEMS"
            print(f"{state}: {page} ({res.images} images)")
            for p in res.problems:
                print(f"    {p}")
            bad += bool(res.problems)
    print(f"browser check: {len(pages) - bad} pages ok, {bad} with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
