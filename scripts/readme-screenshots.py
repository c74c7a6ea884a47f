#!/usr/bin/env python3
"""The README's screenshots: one committed report of each kind, drawn by ``kimi-bench
render`` from its report.json into a temporary folder, opened in headless Chromium
(Debian's ``chromium``, driven by playwright, as ``tests/browser`` does) and the top of
the page saved as a small palette PNG under ``docs/screenshots/``.

    python scripts/readme-screenshots.py            # all four
    python scripts/readme-screenshots.py --out DIR  # somewhere else
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kimi_bench.report.files import report_file

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
SHOTS = {
    "parity": "reports/baselines/h200/parity/builtin-k3",
    "micro": "reports/baselines/h200/micro/sglang-0.5.23/r8-shm",
    "serve-ab": "reports/baselines/h200/serve-ab/r8-shm",
    "project": "reports/projection/h200-from-r2",
}
WIDTH, HEIGHT = 1280, 1150  # the top of the page: the verdict, the caption, the first figure


def render(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    data = report_file(src)  # report.json, or report.json.gz in the checkout
    shutil.copy2(data, dest / data.name)
    done = subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", "render", str(dest)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"kimi-bench render {dest} failed:\n{done.stdout}\n{done.stderr}")
    return dest / "report.html"


def shoot(pages: dict[str, Path], out: Path) -> None:
    from PIL import Image
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            for name, page_path in pages.items():
                ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
                page = ctx.new_page()
                page.goto(page_path.resolve().as_uri(), wait_until="load")
                raw = out / f".{name}.raw.png"
                page.screenshot(path=str(raw))
                ctx.close()
                with Image.open(raw) as im:  # 256 colours: a page of text and flat charts
                    im.convert("RGB").quantize(colors=256).save(out / f"{name}.png", optimize=True)
                raw.unlink()
                print(out / f"{name}.png", (out / f"{name}.png").stat().st_size, "bytes")
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = ap.parse_args(argv)
    if not CHROMIUM.is_file():
        print(f"error: {CHROMIUM} is missing (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kb-shots-") as tmp:
        pages = {name: render(REPO / src, Path(tmp) / name) for name, src in SHOTS.items()}
        shoot(pages, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
