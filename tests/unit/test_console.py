"""Console output: literal messages (no Rich markup from user strings), tables that never
split a number when piped, --format, NO_COLOR, --version."""

from __future__ import annotations

import io
import json
from importlib.metadata import PackageNotFoundError, version

import pytest
import typer
from rich.console import Console
from rich.progress import Task, TaskID
from typer.testing import CliRunner

import kimi_bench
from kimi_bench.cli import common, tables
from kimi_bench.cli.common import make_console, say, verdict_line
from kimi_bench.cli.main import app
from kimi_bench.cli.tables import show_tables

MARKUPISH = [
    "[/tmp/x]",
    "gloo: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Connection closed",
    "[red]y.png",
    "[bold]not bold[/bold] \\[escaped] [link=http://x]l[/link] :smile:",
]

PARITY_ROWS = [
    {
        "input": "rgb_640x480_with_a_rather_long_name",
        "WxH": "640x480",
        "grid": [1, 10, 20],
        "fp32": True,
        "vs PIL": 0.0078431372,
        "error": None,
    },
    {
        "input": "[red]y.png",
        "WxH": "28673x28",
        "grid": [1, 2, 1024],
        "fp32": False,
        "vs PIL": 0.19607843,
        "error": "gloo [/x/pair.cc:537] closed",
    },
]
PARITY_TOKENS = ["640x480", "1x10x20", "0.007843", "28673x28", "1x2x1024", "0.1961", "[red]y.png"]
GATE_ROWS = [
    {
        "report": "micro",
        "rule": "micro.deferred_over_floor <= 80",
        "measured": 59.97192965613673,
        "verdict": "pass",
        "reason": "59.97 <= 80",
    },
    {
        "report": "serve-ab",
        "rule": "serve-ab.median_ttft_delta@inf <= -0.05",
        "measured": -0.4653,
        "verdict": "fail",
        "reason": "delta -46.5% vs baseline +1.0%",
    },
]
GATE_TOKENS = [
    "micro.deferred_over_floor",
    "serve-ab.median_ttft_delta@inf",
    "59.97",
    "-0.4653",
]


def piped(width: int = 30) -> tuple[Console, io.StringIO]:
    """A console writing to a string: not a terminal, ``width`` columns."""
    buf = io.StringIO()
    return make_console(file=buf, width=width), buf


@pytest.mark.parametrize("message", MARKUPISH)
def test_messages_print_literally(message: str) -> None:
    con, buf = piped(width=200)
    say(message, to=con)
    say(message, label="error:", label_style="bold red", to=con)
    verdict_line(message, False, to=con)
    lines = buf.getvalue().splitlines()
    assert lines == [message, f"error: {message}", message]


def test_usage_error_prints_literally_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    exit_ = common.usage_error("cannot read [/tmp/x] or [red]y.png")
    assert isinstance(exit_, typer.Exit) and exit_.exit_code == 2
    assert "error: cannot read [/tmp/x] or [red]y.png" in capsys.readouterr().err


def test_notes_and_warnings_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    common.note("floor [/x]")
    common.warn("no chart [y]")
    out = capsys.readouterr()
    assert out.out == ""
    assert "note: floor [/x]" in out.err and "warning: no chart [y]" in out.err


def test_piped_messages_are_not_wrapped() -> None:
    con, buf = piped(width=20)
    path = "reports/runs/serve-ab-20261130-090700/report.json"
    say(f"report: {path}", to=con)
    assert buf.getvalue() == f"report: {path}\n"


@pytest.mark.parametrize(
    ("rows", "tokens"), [(PARITY_ROWS, PARITY_TOKENS), (GATE_ROWS, GATE_TOKENS)]
)
def test_narrow_piped_table_keeps_every_cell_whole(
    rows: list[dict[str, object]], tokens: list[str]
) -> None:
    con, buf = piped(width=30)
    show_tables([("t", rows, list(rows[0]))], to=con)
    lines = buf.getvalue().splitlines()
    for token in tokens:
        assert any(token in line for line in lines), (token, buf.getvalue())
    assert len(lines) == len(rows) + 5  # title, top rule, header, separator, rows, bottom


def test_piped_console_is_wide_even_for_a_plain_print(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    buf = io.StringIO()
    con = make_console(file=buf)  # not a terminal, no width given
    assert con.width == common.PIPE_WIDTH
    con.print(tables.rich_table("gate", GATE_ROWS, list(GATE_ROWS[0])))
    lines = buf.getvalue().splitlines()
    assert len(lines) == len(GATE_ROWS) + 5
    for token in GATE_TOKENS:
        assert any(token in line for line in lines), token
    monkeypatch.setenv("COLUMNS", "50")
    assert make_console(file=io.StringIO()).width == 50  # an explicit COLUMNS wins


def test_narrow_terminal_table_never_cuts_a_number() -> None:
    """On a terminal as in a pipe: the leading columns whole, the others named."""
    buf = io.StringIO()
    con = make_console(file=buf, width=30, force_terminal=True)
    show_tables([("parity", PARITY_ROWS, list(PARITY_ROWS[0]))], to=con)
    text = buf.getvalue()
    flat = " ".join(text.split())
    for token in ("rgb_640x480_with_a_rather_long_name", "[red]y.png", "640x480", "28673x28"):
        assert token in text, token  # the leading columns: every row identifiable
    assert "more column(s) in the report and in --format md/json" in flat
    assert all(c in flat for c in ("grid", "fp32", "vs PIL", "error"))  # named
    assert "…" not in text


def test_numberish_detection() -> None:
    numeric: list[object] = [1, 2.5, True, [1, 10, 20], "640x480", "+5.3%", "12.1 ms", "-0.46"]
    for v in numeric:
        assert tables._is_numeric(v), v
    text: list[object] = ["rgb_640x480", "micro.deferred_over_floor <= 80", "[1]", "n/a", ["a"]]
    for v in text:
        assert not tables._is_numeric(v), v


def test_markdown_and_json_formats() -> None:
    con, buf = piped()
    show_tables([("gate", GATE_ROWS, ["rule", "measured"])], "json", to=con)
    doc = json.loads(buf.getvalue())
    assert doc == {"gate": [{"rule": r["rule"], "measured": r["measured"]} for r in GATE_ROWS]}
    con, buf = piped()
    show_tables([("parity", PARITY_ROWS, ["input", "grid", "fp32"])], "md", to=con)
    lines = buf.getvalue().splitlines()
    assert lines[:4] == ["## parity", "", "| input | grid | fp32 |", "|---|---|---|"]
    assert lines[4] == "| rgb_640x480_with_a_rather_long_name | 1x10x20 | yes |"
    with pytest.raises(ValueError):
        show_tables([], "xml", to=con)


@pytest.mark.parametrize("no_color", ["1", ""])
def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch, no_color: str) -> None:
    monkeypatch.setenv("NO_COLOR", no_color)
    buf = io.StringIO()
    con = make_console(file=buf, force_terminal=True, width=80)
    verdict_line("PASS", True, to=con)
    show_tables([("t", [{"ok": True}], ["ok"])], to=con)
    green = "\x1b[32m" in buf.getvalue() or "\x1b[1;32m" in buf.getvalue()
    assert green is (no_color == "")
    assert "PASS" in buf.getvalue()


def test_progress_item_is_not_markup() -> None:
    bar = common.progress_bar(3, "parity")
    item_column = bar.columns[-1]
    task = Task(
        TaskID(0), "parity", 3, 0, _get_time=lambda: 0.0, fields={"item": "[/tmp/x] [red]y"}
    )
    assert item_column.render(task).plain == "[/tmp/x] [red]y"  # type: ignore[union-attr]


def test_version_option() -> None:
    try:
        want = version("kimi-bench")
    except PackageNotFoundError:
        want = kimi_bench.__version__
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"kimi-bench {want}"
    assert common.package_version() == want
