"""Tables off a terminal (a pipe, a CI log) stay readable: at most PIPE_TABLE_WIDTH (120)
characters a line, text folded inside its cell, numbers never split; a table whose numbers
alone need more keeps its leading columns and names the others in a caption."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_bench.cli import tables
from kimi_bench.cli.common import make_console
from kimi_bench.cli.tables import PIPE_TABLE_WIDTH, show_tables

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "reports" / "baselines" / "h200"


def _kimi_bench(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kimi-bench")
    cmd = [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.mark.slow  # gates every H200 baseline in its own process
def test_piped_gate_table_is_at_most_120_wide_and_keeps_every_rule():
    res = _kimi_bench("gate", str(H200), "--rules", "gate-h200")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= PIPE_TABLE_WIDTH
    for rule in ("micro.max_floor_ratio", "parity.all_bit_exact", "serve_ab.max_failed"):
        assert any(rule in line for line in lines), rule
    assert "micro (8 ranks, shm)" in res.stdout  # a report label, whole


@pytest.mark.slow  # compares two H200 reports in its own process
def test_piped_compare_table_is_at_most_120_wide():
    a, b = H200 / "micro/sglang-0.5.23/r2-shm", H200 / "micro/sglang-0.5.23/r4-shm"
    res = _kimi_bench("compare", str(a), str(b))
    assert res.returncode in (0, 1), res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= PIPE_TABLE_WIDTH
    assert any("owner_materialize" in line for line in lines)


def test_too_many_numbers_drop_trailing_columns_named_in_a_caption():
    cols = [f"metric_{i:02d}" for i in range(14)]
    rows = [{c: 123456.789 + i for i, c in enumerate(cols)} for _ in range(3)]
    buf = io.StringIO()
    con = make_console(file=buf, width=4096)  # not a terminal
    show_tables([("wide", rows, ["arm", *cols])], to=con)
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= PIPE_TABLE_WIDTH
    assert "more column(s) in the report and in --format md/json" in out
    assert "metric_13" in out.replace("\n", " ")  # named, not lost
    assert "123456.8" not in out or "1.235e+05" in out  # numbers whole (4 significant)
    # md and json keep every column
    buf = io.StringIO()
    show_tables([("wide", rows, cols)], "json", to=make_console(file=buf))
    assert list(json.loads(buf.getvalue())["wide"][0]) == cols
    assert tables.min_width(tables.rich_table("wide", rows, cols)) > PIPE_TABLE_WIDTH


def test_intervals_are_never_squeezed_and_the_leading_columns_keep_their_width():
    """Interval cells hold spaces ("+4.1% .. +66.2% (95% CI)"), so Rich measures them by
    their longest word; a serve-ab A/B table once printed its rate and comparison columns
    at width 0 and every interval cut to "+31.…" (the intervals do not wrap)."""
    from kimi_bench.report.table import Span

    cols = ["rate", "comparison"] + [f"m{i}" for i in range(8)]
    fmts = {c: "span" for c in cols[2:]}
    rows = [{"rate": r, "comparison": "deferred vs eager",
             **{c: Span(-90.1, 461.7, "range", "pct") for c in cols[2:]}}
            for r in ("4", "inf")]  # fmt: skip
    buf = io.StringIO()
    table = tables.fitting_table("ab", rows, cols, PIPE_TABLE_WIDTH, fmts)
    tables.print_table(table, to=make_console(file=buf, width=4096))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= PIPE_TABLE_WIDTH
    assert "deferred vs eager" in out and "…" not in out
    assert out.count("-90.1% .. +461.7% (range)") >= 2  # each shown interval whole
    assert "more column(s)" in out
