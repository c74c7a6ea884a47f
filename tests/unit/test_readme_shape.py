"""The README stays a few screens (issue 46): at most 25 KB, the main job's verdict and the
PR comparison within its first 300 lines, and every link of the README and the docs pages
reaching a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_readme_is_at_most_25_kb():
    assert len(README.read_bytes()) <= 25 * 1024


def test_main_job_verdict_and_pr_comparison_come_first():
    head = "\n".join(README.read_text().splitlines()[:300])
    assert "kimi-bench run" in head and "gate PASS" in head  # the main job and its verdict
    assert "## Reading a verdict" in head
    assert "## The PR's claims beside what kimi-bench measures" in head
    for claim in ("+248%", "-78.7%", "bit-identical BF16"):
        assert claim in head, claim


def test_every_relative_link_reaches_a_file():
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    missing = []
    for page in pages:
        for target, _anchor in LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                missing.append(f"{page.relative_to(REPO)} -> {target}")
    assert missing == []


def test_every_docs_page_is_reachable_from_the_readme_or_another_page():
    pages = sorted((REPO / "docs").glob("*.md"))
    linked = set()
    for page in [README, *pages]:
        for target, _anchor in LINK.findall(page.read_text()):
            linked.add((page.parent / target).resolve())
    assert [p.name for p in pages if p.resolve() not in linked] == []
