"""Verdict wording and colour follow the data (issue 28): a slower arm and a significant
TTFT regression are red, never green; an interval across "no change" leads with "no
difference resolved"; one ratio per comparison, the paired per-repeat one with its
interval; a payload-cost ratio is a line only with its own interval and says so when it
contradicts the total. Checked on the lines, on the page ``kimi-bench render`` writes, in
report.md and in the terminal colours."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kimi_bench.infra.stats import Measurement
from kimi_bench.report import verdicts
from kimi_bench.report.model import load_report
from tests import ci_reports
from tests.committed import committed_reports

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "reports" / "examples" / "cpu-run"
H200 = REPO / "reports" / "baselines" / "h200"


def paired(samples: list[float]) -> dict[str, Any]:
    """A speedup block as micro writes it: per-repeat ratios and their bootstrap interval."""
    m = Measurement(samples, "x", "base total / arm total", list(range(len(samples))))
    return m.as_dict() | {"interval": m.interval().as_dict()}


def micro(**speedups: dict[str, Any]) -> dict[str, Any]:
    rep = load_report(EXAMPLE / "micro").to_dict()
    rep["speedups"] = speedups
    rep["summary"]["repeats_completed"] = 5
    return rep


def tones(lines: list[verdicts.Line]) -> dict[str, str]:
    return {ln.text: ln.tone for ln in lines}


def test_a_slower_arm_is_red_and_says_slower() -> None:
    rep = micro(deferred_vs_eager=paired([0.80, 0.82, 0.78, 0.81, 0.79]))
    line = verdicts.lines(rep)[0]
    assert line.tone == "bad"
    assert line.text.startswith("deferred 1.25x slower than eager (95% CI ")
    assert "slower" in line.text.split("CI")[1] and "faster" not in line.text
    assert verdicts.worst(verdicts.lines(rep)) == "bad"


def test_an_interval_across_one_leads_with_no_difference_resolved() -> None:
    """The issue's example: per-repeat ratios 0.56, 2.66, 0.93, 3.16, 0.79 (median 0.93,
    "1.08x slower") beside median totals of 1520 and 1053 ms: no difference is resolved."""
    rep = micro(deferred_vs_eager=paired([0.56, 2.66, 0.93, 3.16, 0.79]))
    line = verdicts.lines(rep)[0]
    assert line.tone == "unresolved"
    assert line.text.startswith("no difference resolved: deferred vs eager 1.08x slower")
    assert "slower to" in line.text and "faster" in line.text  # the interval's two ends
    assert verdicts.worst(verdicts.lines(rep)) == "unresolved"


def test_a_ratio_its_interval_does_not_support_is_not_a_headline() -> None:
    block = {"median": 1.82, "n_units": 5,
             "interval": {"low": 1 / 6.47, "high": 7.25, "kind": "ci"}}  # fmt: skip
    line = verdicts.lines(micro(**{"deferred-decode_vs_eager": block}))[0]
    assert line.text.startswith("no difference resolved: deferred-decode vs eager 1.82x faster")
    assert "6.47x slower to 7.25x faster" in line.text


def test_one_ratio_per_comparison_and_payload_lines_carry_their_interval() -> None:
    rep = micro(**{"zero-copy_vs_deferred": paired([1.10, 1.14, 1.12, 1.16, 1.13])})
    # a control block of the model's shape (report.kinds.Control), holding two payload ratios
    floor = {"data_floor_ms": None, "control_ms": None, "floor_ms": None}
    rep["control"] = {
        "rounds": 5, "arms": {}, "payload": {}, "emulation_only": [], "floor": floor,
        "payload_speedups": {
            # zero-copy faster in total, slower in payload cost: a contradiction to explain
            "zero-copy_vs_deferred": {
                "median": 0.8,
                "interval": {"low": 0.7, "high": 0.9, "kind": "ci"},
            },
            # a payload ratio without an interval: no headline
            "deferred_vs_eager": {"median": 3.0, "interval": {"low": None, "high": None,
                                                              "kind": "none"}},
        }
    }  # fmt: skip
    lines = verdicts.lines(rep)
    by = tones(lines)
    total = next(t for t in by if t.startswith("zero-copy 1.13x faster than deferred"))
    assert by[total] == "good"
    payload = next(t for t in by if t.startswith("payload cost"))
    assert payload.startswith(
        "payload cost (arm minus control): zero-copy 1.25x slower than deferred (95% CI 1.11-"
    )
    assert "the total says the opposite" in payload and by[payload] == "bad"
    assert not [t for t in by if "deferred" in t and "3.00x" in t]  # no interval: no line
    assert sum(t.count("zero-copy") for t in by if not t.startswith("payload")) == 1


def serve(delta: float, low: float, high: float, significant: bool) -> dict[str, Any]:
    rep = load_report(H200 / "serve-ab" / "r8-shm").to_dict()
    med = rep["ab"]["inf"]["deferred"]["median_ttft"]
    med |= {"delta_pct": delta, "significant": significant,
            "interval": med["interval"] | {"low": low, "high": high, "kind": "ci"}}  # fmt: skip
    return rep


def test_a_significant_ttft_regression_is_red() -> None:
    rep = serve(37.3, 2.4, 93.5, True)
    line = next(ln for ln in verdicts.lines(rep) if ln.text.startswith("rate inf: deferred"))
    assert line.tone == "bad"
    assert line.text.startswith("rate inf: deferred median TTFT +37.3% vs eager, SLOWER (95% CI")
    assert verdicts.worst(verdicts.lines(rep)) == "bad"


def test_a_ttft_interval_across_zero_is_not_resolved() -> None:
    rep = serve(-19.5, -36.2, 20.9, False)
    line = next(ln for ln in verdicts.lines(rep) if "rate inf" in ln.text and "deferred" in ln.text)
    assert line.tone == "unresolved"
    assert line.text.startswith("rate inf: no difference resolved in median TTFT: deferred -19.5%")


def kimi_bench(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kimi-bench")
    cmd = [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["slower", "regression"])
def test_the_rendered_page_and_markdown_say_it_in_red(case: str, tmp_path: Path) -> None:
    """As a user sees it: ``kimi-bench render`` on a saved report (built by the real report
    builders from raw data, so that it is read back: a report whose derived blocks were
    edited alone is refused); the verdict box and the line are marked bad, report.md says
    BAD."""
    if case == "slower":  # eager totals 0.8x the deferred ones, every repeat
        rep = ci_reports.micro([100.0, 102.0, 98.0, 101.0, 99.0], [0.8] * 5).to_dict()
        want = "deferred 1.25x slower than eager"
    else:  # every deferred request 40% slower, in forward batches of one request
        eager = [100.0 + 3 * i for i in range(12)]
        rep = ci_reports.serve({"eager": eager, "deferred": [1.4 * x for x in eager]}).to_dict()
        want = "rate inf: deferred median TTFT +40.0% vs eager, SLOWER"
    folder = tmp_path / case
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(rep))
    done = kimi_bench("render", str(folder))
    assert done.returncode == 0, done.stdout + done.stderr
    page = (folder / "report.html").read_text()
    assert '<div class="verdict bad">' in page
    assert f'<li class="bad">{want}' in page
    md = (folder / "report.md").read_text()
    assert f"- **BAD**: {want}" in md


def test_terminal_colours_follow_the_tone() -> None:
    import io

    from kimi_bench.cli.common import make_console, verdict_lines

    buf = io.StringIO()
    con = make_console(file=buf, force_terminal=True, width=200)
    lines = [verdicts.Line("a slower", "bad"), verdicts.Line("a faster", "good"),
             verdicts.Line("no difference resolved: x", "unresolved")]  # fmt: skip
    verdict_lines(lines, to=con)
    out = buf.getvalue().splitlines()
    assert "\x1b[1;31m" in out[0] and "\x1b[1;32m" in out[1] and "\x1b[1;33m" in out[2]


@pytest.mark.slow
def test_committed_reports_read_right() -> None:
    """No committed report is green where its data says slower or unresolved."""
    for path in committed_reports():
        rep = load_report(path).to_dict()
        for ln in verdicts.lines(copy.deepcopy(rep)):
            if ln.tone == "good":
                assert "slower" not in ln.text.lower() and "no difference" not in ln.text
            if "no difference resolved" in ln.text:
                assert ln.tone in ("unresolved", "bad")
