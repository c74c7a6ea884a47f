"""User text in reports is quoted for each format (issue 33, ``report.quote``): a note or
a file name never becomes a live Markdown link, a spreadsheet formula, a terminal escape
sequence or a broken table row. Driven as a user does it: the installed ``kimi-bench
parity`` on a folder of files with hostile names and a hostile ``--note``; then the files
it wrote and what it printed are read back."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
from markdown_it import MarkdownIt
from PIL import Image

LINK = "[x](javascript:alert(1))"
NAMES = {
    "link": f"{LINK}.png",
    "formula": "=cmd|' -C calc'!A0.png",
    "ansi": "\x1b[31mred\x1b[0m.png",
    "crlf": "line\r\nbreak.png",
    "plus": "+SUM(A1).png",
}


def kimi_bench(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kimi-bench")
    cmd = [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


# the module's tests share its fixture's run: one worker runs them all, the run once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("quoting")]  # a parity run of its own


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("quoting")
    images = root / "images"
    images.mkdir()
    for i, name in enumerate(NAMES.values()):
        Image.new("RGB", (40 + 8 * i, 32), (10 * i, 80, 160)).save(images / name, format="PNG")
    out = root / "out"
    done = kimi_bench("parity", "--images", str(images), "--device", "cpu", "--ranks", "1",
                      "--note", LINK, "--output-dir", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return {"out": out, "stdout": done.stdout, "stderr": done.stderr}


@pytest.mark.slow
def test_markdown_has_no_link_and_no_broken_row(run: dict[str, Any]) -> None:
    md = (run["out"] / "report.md").read_text()
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    assert "<a " not in rendered and "javascript:" not in re.sub(r">[^<]*<", "><", rendered)
    assert LINK not in md  # only as escaped text: \[x\](javascript:alert(1))
    assert "\\[x\\](javascript:alert(1))" in md
    assert "\x1b" not in md and "\r" not in md
    # every input is one row of the per-input table, the CR/LF name included
    table = md.split("## Per input")[1].split("\n## ")[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| ")][1:]
    assert len(rows) == len(NAMES), rows
    # as rendered: the names with their control characters shown, one table cell each
    assert "<td>line\\r\\nbreak.png</td>" in rendered
    assert "<td>\\x1b[31mred\\x1b[0m.png</td>" in rendered
    assert "<td>[x](javascript:alert(1)).png</td>" in rendered


@pytest.mark.slow
def test_html_has_no_link(run: dict[str, Any]) -> None:
    page = (run["out"] / "report.html").read_text()
    assert '<a href="javascript' not in page and "href='javascript" not in page
    assert "\x1b" not in page
    assert "[x](javascript:alert(1))" in page  # the note, as plain (escaped) text


def test_csv_cells_are_never_formulas(run: dict[str, Any]) -> None:
    with (run["out"] / "parity.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    names = [r["name"] for r in rows]
    assert "'=cmd|' -C calc'!A0.png" in names and "'+SUM(A1).png" in names
    for r in rows:
        for value in r.values():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), (r["name"], value)
    assert "\x1b" not in (run["out"] / "parity.csv").read_text()


def test_terminal_gets_no_escape_sequence(run: dict[str, Any]) -> None:
    for stream in ("stdout", "stderr"):
        text = run[stream]
        assert "\x1b[31m" not in text and "\r" not in text, stream
    assert "\\x1b[31mred" in run["stdout"]  # the name, shown with its escape visible
