"""Issue 45 through the installed commands, each a real ``kimi-bench`` process on files the
tests write per tool and version (``tests.peers``):

- every one-lie variant of ``tests.peers.lie_table`` is refused by ``kimi-bench import``
  (exit 2 naming the field and the file, no report written), and ``gate`` and ``compare``
  then have no report of it to pass;
- every load field removed is "not recorded" when the file is imported alone (never the
  most aggressive load), refused beside an arm that records it, and ``compare`` and a rule
  for the load the run had say so;
- an honest file of each tool at each load: the imported report's TTFT/ITL/TPOT/E2E
  mean/median/p90/p99, throughput, failures and load are what the tool printed (to its
  2 decimals, read from its file by ``tests.peers.printed``), or the report names the
  tool's method beside both figures; ``gate`` counts its failures;
- one result file is never two arms, nor the two sides of ``compare``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.bad_inputs.test_inputs_that_lie import kb, rules
from tests.peers import fixtures as fx
from tests.peers.lie_table import LIES, UNRECORDED
from tests.peers.lies import Lie, write_lie, write_twin
from tests.peers.printed import DIGITS, METRICS, STATS, printed

REFUSED = [lie for lie in LIES if not lie.ab]
NOT_RECORDED = [lie for lie in LIES if lie.ab]
GATE_ROWS = "[serve_ab]\nmax_failed = 0\n"
LABELS = {"inf": "inf", "c1": "c1", "4": "4"}
SUMMARY_ONLY = ("aiperf", "vllm-summary", "sglang-summary")
# the tool's own method, named in the report where its figure and kimi-bench's differ
METHOD = {"guidellm": "GuideLLM's weighted distribution", "aiperf-records": "AIPerf"}


def _import(*args: str | Path) -> tuple[int, str, dict[str, Any] | None]:
    out = Path(args[-1])
    code, text = kb("import", *args[:-1], "--output-dir", out)
    report = out / "report.json"
    return code, text, json.loads(report.read_text()) if report.exists() else None


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An honest import to compare against (a burst of sglang.bench_serving)."""
    folder = tmp_path_factory.mktemp("honest")
    code, text, _ = _import(fx.write("sglang", fx.make_run("inf"), folder), folder / "imp")
    assert code == 0, text
    return folder / "imp"


@pytest.mark.slow
@pytest.mark.parametrize("lie", REFUSED, ids=[lie.id for lie in REFUSED])
def test_each_lie_is_refused_by_the_installed_import_then_gate_and_compare(
    tmp_path: Path, lie: Lie, honest: Path
) -> None:
    out = tmp_path / "out"
    code, text, report = _import(write_lie(lie, tmp_path / "lie"), out)
    assert code == 2 and lie.says in text, text
    assert fx.NAMES[lie.tool] in text or "profile_export" in text, text
    assert report is None and not out.exists() and "report:" not in text
    code, text = kb("gate", out, "--rules", rules(tmp_path, GATE_ROWS))
    assert code == 2 and "PASS" not in text and str(out) in text, text
    code, text = kb("compare", honest, out)
    assert code == 2 and str(out) in text and "%" not in text, text


def _expected_label(lie_or_tool: str, load: str, n: int = 12) -> str:
    """AIPerf writes a burst as ``--concurrency N`` (N the request count)."""
    return f"c{n}" if lie_or_tool.startswith("aiperf") and load == "inf" else LABELS[load]


@pytest.mark.slow
@pytest.mark.parametrize("lie", NOT_RECORDED, ids=[lie.id for lie in NOT_RECORDED])
def test_a_load_field_removed_is_not_recorded_never_guessed(tmp_path: Path, lie: Lie) -> None:
    twin, bad = write_twin(lie, tmp_path / "twin"), write_lie(lie, tmp_path / "lie")
    code, text, _ = _import(twin, bad, "--arm", "twin", "--arm", "lie", tmp_path / "ab")
    assert code == 2 and f"lie: {bad.name} {UNRECORDED}" in text, text
    code, text, alone = _import(bad, tmp_path / "alone")
    assert code == 0 and alone is not None, text
    assert "not recorded" in text  # the import's load note
    if lie.id == "aiperf-records-without-export":  # its version is in the export alone
        assert "version is not recorded" in text and "--tool-version" in text, text
    code, _, kept = _import(twin, tmp_path / "kept")
    assert code == 0 and kept is not None
    label = kept["config"]["rate_labels"][0]
    assert label == _expected_label(lie.tool, lie.load)
    lost = set(alone["config"]["load"]["not_recorded"])
    assert lost - set(kept["config"]["load"]["not_recorded"])  # the field removed, said so
    assert alone["config"]["rate_labels"] != ["inf"]  # never read as a burst
    code, text = kb("compare", tmp_path / "kept", tmp_path / "alone")
    assert code == 0 and "not comparable: " in text and "not recorded" in text, text
    assert "{" not in text
    assert "significant" not in text.replace("no delta is called significant", "")
    limits = f'[serve_ab."{label}"]\nmax_p99_ttft_ms = 100000\n'
    code, text = kb(
        "gate", tmp_path / "alone", "--rules", rules(tmp_path, limits), "--format", "md"
    )
    if alone["config"]["rate_labels"] == ["unrecorded"]:
        assert code == 1 and "does not record its load" in text and "was not run" not in text
    else:  # burstiness alone lost at a recorded rate: that rate's rules are evaluated
        assert alone["config"]["load"]["not_recorded"] == ["burstiness", "warmup"]
        assert code == 0 and f"serve_ab.{label}" in text, text


def _check_figures(tool: str, row: dict[str, Any], tool_says: dict[str, float]) -> None:
    """The report's figures against what the tool printed: the tool's own carried as
    ``tool_*`` (to its digits), kimi-bench's equal to its digits or the method named."""
    shown = 0
    for metric in METRICS:
        for stat in STATS:
            says = tool_says.get(f"{metric}_{stat}")
            if says is None:
                continue
            carried = row.get(f"tool_{metric}_{stat}_ms")
            assert carried is not None and round(carried, DIGITS) == round(says, DIGITS), (
                metric, stat, carried, says)  # fmt: skip
            mine = row.get(f"{metric}_{stat}_ms")
            if mine is not None and round(mine, DIGITS) != round(says, DIGITS):
                assert METHOD[tool] in row["tool_method"], (metric, stat, mine, says)
            shown += 1
    assert shown >= 8, tool_says  # at least TTFT and ITL or TPOT, mean to p99
    assert round(row["tool_req_per_s"], DIGITS) == round(tool_says["req_per_s"], DIGITS)
    if tool.startswith("aiperf"):  # AIPerf divides by an observation window not in its file
        assert math.isclose(row["req_per_s"], tool_says["req_per_s"], rel_tol=0.05)
    else:
        assert round(row["req_per_s"], DIGITS) == round(tool_says["req_per_s"], DIGITS)


TOOLS = ("sglang", "sglang-summary", "vllm", "vllm-summary", "guidellm", "aiperf",
         "aiperf-records")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("load", "failed"), [("inf", 3), ("c1", 0), ("4", 3)])
@pytest.mark.parametrize("tool", TOOLS)
def test_an_honest_files_report_shows_what_the_tool_printed(
    tmp_path: Path, tool: str, load: str, failed: int
) -> None:
    run = fx.make_run(load, failed=failed)
    path = fx.write(tool, run, tmp_path / "files")
    code, text, rep = _import(path, tmp_path / "imp")
    assert code == 0 and rep is not None, text
    row = rep["results"][0]
    _check_figures(tool, row, printed(tool, path))
    cfg = rep["config"]["load"]
    assert rep["config"]["rate_labels"] == [_expected_label(tool, load)]
    assert cfg["request_rate"] == (4.0 if load == "4" else None)
    assert cfg["unlimited_rate"] is (load != "4")
    counted = None if tool == "sglang-summary" else failed  # its summary counts no failures
    assert row["failed"] == counted and row["completed"] == len(run.ok)
    code, text = kb("gate", tmp_path / "imp", "--rules", rules(tmp_path, GATE_ROWS), "--format",
                    "md")  # fmt: skip
    if tool in SUMMARY_ONLY:  # no rows to count failures from: fails by name, never passes
        assert code == 1 and "serve_ab.max_failed" in text and "PASS" not in text, text
    elif failed:
        assert code == 1 and f"| fail | {failed} failed requests |" in text, text
    else:
        assert code == 0 and "gate PASS" in text, text


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["sglang", "guidellm", "aiperf"])
def test_one_result_file_is_never_two_arms_nor_both_sides_of_compare(
    tmp_path: Path, tool: str
) -> None:
    """The same file twice, or a copy under another name: refused (its delta would be
    +0.0% by construction); two imports of it cannot be compared either."""
    path = fx.write(tool, fx.make_run("inf"), tmp_path / "run")
    copy = tmp_path / "copy" / path.name
    shutil.copytree(path.parent, copy.parent)
    for second in (path, copy):
        code, text, rep = _import(path, second, "--arm", "a", "--arm", "b", tmp_path / "ab")
        assert code == 2 and "is the same file as the a arm" in text and rep is None, text
    assert _import(path, tmp_path / "a")[0] == 0 and _import(copy, tmp_path / "b")[0] == 0
    code, text = kb("compare", tmp_path / "a", tmp_path / "b")
    assert code == 2 and "imported from the same result file" in text, text
    assert "A_ttft_median_ms" not in text  # no table of the run against itself
