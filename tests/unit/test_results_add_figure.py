"""Issue 41: a derived figure is declared once. Adding micro's p95 total per arm to a copy
of the package changes one package file (``results/micro_figures.py``: an import and the
figure's row in ``FIGURES``); the commands run from that copy then show it in the stages
table, gate it by name from a rules file, and refuse a report whose summary states it
wrongly (exit 2)."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "reports" / "examples" / "cpu-run" / "micro" / "report.json"

FIGURE = """    Figure(
        "{arm}_p95_ms",
        "p95 total (ms)",
        lambda d, a: percentile(d.arms[a].total.samples, 95) if d.arms[a].total.n else None,
        "arm",
        column="p95_ms",
    ),
)
"""


def _add_figure(pkg: Path) -> None:
    """The whole change: an import and one row of the figure table."""
    path = pkg / "results" / "micro_figures.py"
    text = path.read_text()
    end = text.index("\n)\n", text.index("FIGURES: tuple[Figure, ...] = (")) + 1
    text = text[:end] + FIGURE + text[end + len(")\n") :]
    anchor = "from kimi_bench.results.micro import MicroDerived\n"
    text = text.replace(anchor, "from kimi_bench.infra.stats import percentile\n" + anchor)
    path.write_text(text)


def _changed(a: Path, b: Path) -> list[str]:
    """Files that differ between two package trees (added, removed or edited)."""
    out: list[str] = []

    def walk(c: filecmp.dircmp[str], at: str) -> None:
        out.extend(f"{at}{n}" for n in [*c.left_only, *c.right_only, *c.diff_files])
        for name, sub in c.subdirs.items():
            walk(sub, f"{at}{name}/")

    walk(filecmp.dircmp(a, b, ignore=["__pycache__"]), "")
    return out


def _kimi(root: Path, *args: str | Path, cwd: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"}
    res = subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", *map(str, args)],
        capture_output=True, text=True, timeout=300, check=False, cwd=cwd, env=env,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    return res.returncode, " ".join(out.split())


@pytest.mark.slow
def test_a_figure_added_in_one_file_is_shown_gated_and_checked(tmp_path: Path) -> None:
    copy = tmp_path / "pkg"
    shutil.copytree(REPO / "kimi_bench", copy / "kimi_bench",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    _add_figure(copy / "kimi_bench")
    changed = _changed(REPO / "kimi_bench", copy / "kimi_bench")
    assert changed == ["results/micro_figures.py"]

    doc = json.loads(REPORT.read_text())
    arm = "deferred"  # the change arm of a report written before it recorded its roles
    p95 = float(np.percentile([r["total_ms"] for r in doc["repeats"][arm]], 95))
    key = f"{arm.replace('-', '_')}_p95_ms"
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_text(json.dumps(doc))

    # shown: the stages table's TOTAL rows gain the column
    code, out = _kimi(copy, "render", run, cwd=tmp_path)
    assert code == 0, out
    md = (run / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| arm | stage |"))
    assert "p95_ms" in header
    assert "p95_ms" not in (REPO / REPORT.parent / "report.md").read_text()

    # gated by name: a [micro.max] limit on it; the package without the figure refuses the name
    rules = tmp_path / "rules.toml"
    rules.write_text(f"[micro.max]\n{key} = {p95 * 2}\n")
    code, out = _kimi(copy, "gate", run, "--rules", rules, cwd=tmp_path)
    assert code == 0 and f"micro.max.{key}" in out, out
    rules.write_text(f"[micro.max]\n{key} = {p95 / 2}\n")
    code, out = _kimi(copy, "gate", run, "--rules", rules, cwd=tmp_path)
    assert code == 1 and f"micro.max.{key}" in out, out
    code, out = _kimi(REPO, "gate", run, "--rules", rules, cwd=tmp_path)
    assert code == 2 and f"unknown micro figure '{key}'" in out, out

    # checked: the summary stating it as derived loads; a hand-edited value is exit 2
    doc["summary"][key] = p95
    (run / "report.json").write_text(json.dumps(doc))
    code, out = _kimi(copy, "render", run, cwd=tmp_path)
    assert code == 0, out
    doc["summary"][key] = p95 * 1.01
    (run / "report.json").write_text(json.dumps(doc))
    code, out = _kimi(copy, "render", run, cwd=tmp_path)
    assert code == 2 and f"summary.{key}" in out, out
