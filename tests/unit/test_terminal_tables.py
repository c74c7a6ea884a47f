"""Console tables on a terminal fit its width as they fit a pipe (issue 46): at 80 and 120
columns every table a command prints keeps its leading columns whole, names the columns
it leaves out, cuts no number, and every row stays identifiable (its identifying cells,
e.g. serve-ab's rate and arm, are on the screen)."""

from __future__ import annotations

import functools
import io
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kimi_bench.cli import common
from kimi_bench.cli.common import make_console
from kimi_bench.cli.tables import show_rendered, show_tables
from kimi_bench.report.model import load_report
from kimi_bench.report.table import Rendered
from kimi_bench.report.view import View, view_of

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "reports" / "baselines" / "h200"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
WIDTHS = (80, 120)

# committed reports of every kind a command prints tables of; the tables each command
# prints are among the report's own tables (micro: stages, copies, control, comparisons,
# noise; serve-ab: per rate and arm, A/B; project; parity's summary)
REPORTS = {
    "parity": H200 / "parity" / "builtin-k3",
    "micro": H200 / "micro" / "sglang-0.5.23" / "r8-pickle",
    "micro-decode": H200 / "gpu-decode" / "micro" / "pr-33921" / "r8-shm-photo",
    "micro-cpu": ROOT / "reports" / "examples" / "cpu-run" / "micro",
    "serve-ab": H200 / "serve-ab" / "r8-pickle",
    "serve-ab-decode": H200 / "gpu-decode" / "serve-ab" / "sglang-0.5.23" / "r8-shm",
    "serve-ab-cpu": ROOT / "reports" / "examples" / "cpu-run" / "serve-ab",
    "project": ROOT / "reports" / "projection" / "h200-from-r2",
}
# the columns that name a row, per table key (the first column when not listed)
IDENTITY = {"serve.per_rate": 2, "serve.ab": 2, "micro.stages": 2, "micro.copies": 2}


@functools.cache
def view(kind: str) -> View:
    return view_of(load_report(REPORTS[kind]))


def terminal(width: int) -> tuple[Any, io.StringIO]:
    buf = io.StringIO()
    return make_console(file=buf, width=width, force_terminal=True), buf


def plain(buf: io.StringIO) -> str:
    return ANSI.sub("", buf.getvalue())


def check_fits(out: str, width: int, rendered: Rendered) -> None:
    """The printed table: no line wider than the terminal, no number cut, each row's
    identifying cells on the screen, the columns left out named."""
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, out
    assert "…" not in out, out
    flat = " ".join(out.split())
    ident = IDENTITY.get(rendered.table.key, 1)
    for row in rendered.cells:
        for cell in row[:ident]:
            for word in cell.split():
                assert word in flat, (rendered.table.key, cell, out)
    shown = sum(1 for c in rendered.table.columns if str(c.header) in flat)
    if shown < len(rendered.table.columns):
        assert "more column(s) in the report and in --format md/json" in flat, out


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", list(REPORTS))
def test_every_report_table_fits_a_terminal(kind: str, width: int) -> None:
    assert view(kind).rendered, kind
    for r in view(kind).rendered:
        if not r.table.rows:
            continue
        con, buf = terminal(width)
        show_rendered([r], to=con)
        check_fits(plain(buf), width, r)


@pytest.mark.parametrize("width", WIDTHS)
def test_serve_ab_tables_keep_rate_and_arm_on_every_row(width: int) -> None:
    """The issue's two serve-ab tables: "Per rate and arm" printed 215 columns on a 120-column
    terminal; the A/B table squeezed rate and comparison to nothing."""
    shown = [r for r in view("serve-ab").rendered if r.table.key in ("serve.per_rate", "serve.ab")]
    assert len(shown) == 2
    con, buf = terminal(width)
    show_rendered(shown, to=con)
    out = plain(buf)
    assert max(len(line) for line in out.splitlines()) <= width
    body = [line for line in out.splitlines() if line.startswith("│")]
    for rate in ("2", "8", "inf"):
        rows = [line for line in body if line.split("│")[1].strip() == rate]
        assert len(rows) >= 4, (rate, out)  # 3 arms per rate, 2 comparisons: all labelled


@pytest.mark.parametrize("width", WIDTHS)
def test_parity_console_table_fits(width: int) -> None:
    from kimi_bench.cli.parity import COLUMNS, _rows

    report = load_report(REPORTS["parity"])
    rows = _rows(report.results)
    con, buf = terminal(width)
    show_tables([("parity (eager vs deferred, torch.equal)", rows, COLUMNS)], to=con)
    out = plain(buf)
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    for row in rows:
        assert str(row["input"]) in " ".join(out.split()), row["input"]


@pytest.mark.slow  # whole commands, in process
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "args",
    [
        [
            "gate",
            str(ROOT / "reports" / "examples" / "cpu-run"),
            "--rules",
            "gate",
            "--allow-no-baseline",
        ],
        [
            "compare",
            str(H200 / "micro/sglang-0.5.23/r2-shm"),
            str(H200 / "micro/sglang-0.5.23/r4-shm"),
        ],
        [
            "project",
            str(H200 / "micro/sglang-0.5.23/r2-shm"),
            str(H200 / "micro/sglang-0.5.23/r2-pickle"),
            "--ranks",
            "4,16",
            "--validate",
            str(H200 / "micro/sglang-0.5.23/r4-shm"),
        ],
    ],
    ids=["gate", "compare", "project"],
)
def test_command_tables_fit_a_terminal(
    args: list[str], width: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kimi_bench.cli.main import app

    con, buf = terminal(width)
    monkeypatch.setattr(common, "console", con)
    if args[0] == "project":
        args = [*args, "--output-dir", str(tmp_path / "p")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code in (0, 1), (res.output, res.exception)
    out = plain(buf)
    tables = [line for line in out.splitlines() if line[:1] in "┃│┏┡└"]
    assert tables, out
    assert max(len(line) for line in out.splitlines()) <= width, out
    assert "…" not in out
