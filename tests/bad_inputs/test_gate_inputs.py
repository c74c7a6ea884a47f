"""The gate and compare on broken, hostile and misleading inputs: each case asserts the
exit code (1 = a rule fails, 2 = unusable input) and a message naming the cause."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.ci.gate import evaluate
from kimi_bench.ci.rules import parse_rules
from kimi_bench.cli.main import app
from kimi_bench.report import model
from kimi_bench.report.model import Report, ReportError
from tests.bad_inputs import reports

RULES = """
[micro]
bit_exact = true
min_speedup = 1.0
[serve_ab]
max_failed = 0
[parity]
all_bit_exact = true
[baseline]
max_regression = 0.10
metrics = ["micro.deferred.total_ms", "micro.speedup", "serve_ab.inf.deferred.ttft_ms"]
"""


def gate(*args: str | Path):
    res = CliRunner().invoke(app, ["gate", *map(str, args)])
    assert "Traceback" not in res.output
    return res


def gate_rows(tmp_path: Path, *args: str | Path) -> tuple[int, dict[str, tuple[str, str]]]:
    """Exit code and {rule: (verdict, reason)} from the JUnit file (the terminal table
    folds long reasons)."""
    junit = tmp_path / "gate.xml"
    res = gate(*args, "--junit", junit)
    out = {}
    for case in ET.parse(junit).getroot().findall("testcase"):
        bad = case.find("failure")
        skip = case.find("skipped")
        node = bad if bad is not None else skip
        verdict = case.find("properties/property[@name='verdict']").get("value")
        out[case.get("name")] = (verdict, node.get("message") if node is not None else "")
    return res.exit_code, out


def flat(text: str) -> str:
    """Rich wraps long lines, also inside words; compare without any whitespace."""
    return "".join(text.split())


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    p = tmp_path / "rules.toml"
    p.write_text(RULES)
    return p


# --- runs that did not complete ------------------------------------------------------


def test_incomplete_micro_report_fails_with_its_reason(tmp_path, rules):
    bad = reports.micro(
        error="worker producer died from signal SIGKILL",
        verdict="INCOMPLETE after 2 repeats: worker producer died from signal SIGKILL",
    )
    code, rows = gate_rows(tmp_path, reports.put(bad, tmp_path / "m"), "--rules", rules)
    assert code == 1
    verdict, why = rows["micro.complete"]
    assert verdict == "fail"
    assert why == "the run did not complete: worker producer died from signal SIGKILL"


def test_incomplete_verdict_without_error_field_fails(tmp_path, rules):
    bad = reports.micro(verdict="INCOMPLETE after 0 repeats: interrupted")
    bad["summary"].pop("error")
    code, rows = gate_rows(tmp_path, reports.put(bad, tmp_path / "m"), "--rules", rules)
    assert code == 1
    assert rows["micro.complete"] == (
        "fail",
        "the run did not complete: INCOMPLETE after 0 repeats: interrupted",
    )


def test_errored_serve_report_fails(tmp_path, rules):
    path = reports.put(reports.serve(error="2 request(s) timed out"), tmp_path / "s")
    code, rows = gate_rows(tmp_path, path, "--rules", rules)
    assert code == 1
    assert rows["serve_ab.complete"] == ("fail", "the run did not complete: 2 request(s) timed out")


def test_complete_reports_pass(tmp_path, rules):
    m = reports.put(reports.micro(), tmp_path / "m")
    s = reports.put(reports.serve(), tmp_path / "s")
    code, rows = gate_rows(tmp_path, m, s, "--rules", rules, "--allow-no-baseline")
    assert code == 0
    assert rows["micro.complete"][0] == rows["serve_ab.complete"][0] == "pass"
    # the same without --allow-no-baseline: every baseline rule skipped, exit 5 (issue 42)
    code, rows = gate_rows(tmp_path, m, s, "--rules", rules)
    assert code == 5 and rows["baseline.micro.speedup"][0] == "skip"


# --- the baseline ------------------------------------------------------------------------


def test_missing_baseline_is_a_usage_error(tmp_path, rules):
    m = reports.put(reports.micro(), tmp_path / "m")
    res = gate(m, "--rules", rules, "--baseline", tmp_path / "nope")
    assert res.exit_code == 2 and flat("does not exist") in flat(res.output)


def test_unreadable_baseline_is_a_usage_error(tmp_path, rules):
    m = reports.put(reports.micro(), tmp_path / "m")
    reports.put("{not json", tmp_path / "base" / "r1")
    res = gate(m, "--rules", rules, "--baseline", tmp_path / "base")
    assert res.exit_code == 2
    assert flat("unusable baseline") in flat(res.output) and flat("not a JSON report") in flat(
        res.output
    )


def test_candidate_cannot_be_its_own_baseline(tmp_path, rules):
    m = reports.put(reports.micro(), tmp_path / "m")
    os.symlink(tmp_path / "m", tmp_path / "alias")
    for given in (
        m,
        tmp_path / "m",
        tmp_path / "alias" / "report.json",
        tmp_path / "m" / ".." / "m",
    ):
        res = gate(m, "--rules", rules, "--baseline", given)
        assert res.exit_code == 2, given
        assert flat("is the gated report itself") in flat(res.output)


def test_folder_search_skips_the_candidate_itself(tmp_path, rules):
    m = reports.put(reports.micro(), tmp_path / "runs" / "m")
    res = gate(m, "--rules", rules, "--baseline", tmp_path / "runs")
    # the only report there is the gated one: an explicit baseline that matches nothing
    assert res.exit_code == 2
    assert flat("has no micro report of this setup (no other report)") in flat(res.output)


def test_baseline_search_does_not_follow_links_out_of_the_folder(tmp_path, rules):
    outside = tmp_path / "outside"
    reports.put(reports.micro([30.0, 31.0, 29.0, 30.5]), outside / "slow")
    (tmp_path / "base").mkdir()
    os.symlink(outside, tmp_path / "base" / "link")
    m = reports.put(reports.micro(), tmp_path / "m")
    res = gate(m, "--rules", rules, "--baseline", tmp_path / "base")
    assert res.exit_code == 2  # the linked report is never read: nothing matches
    assert flat("holds no report.json") in flat(res.output)


def test_baseline_search_skips_fifos_instead_of_blocking(tmp_path, rules):
    base = tmp_path / "base"
    (base / "a").mkdir(parents=True)
    os.mkfifo(base / "a" / "report.json")
    reports.put(reports.micro([10.0, 10.1, 9.9, 10.2]), base / "b")
    m = reports.put(reports.micro(), tmp_path / "m")
    code, rows = gate_rows(tmp_path, m, "--rules", rules, "--baseline", base)
    assert code == 0
    verdict, _ = rows["baseline.micro.deferred.total_ms"]
    assert verdict == "pass"  # compared with base/b, the FIFO beside it never opened


def test_baseline_search_is_bounded(tmp_path, rules, monkeypatch):
    monkeypatch.setattr(model, "MAX_SEARCH_ENTRIES", 50)
    for i in range(60):
        (tmp_path / "base" / f"d{i:02}").mkdir(parents=True)
    m = reports.put(reports.micro(), tmp_path / "m")
    res = gate(m, "--rules", rules, "--baseline", tmp_path / "base")
    assert res.exit_code == 2 and flat("more than 50 entries") in flat(res.output)


def test_baseline_root_of_the_file_system_is_refused(tmp_path, rules):
    m = reports.put(reports.micro(), tmp_path / "m")
    res = gate(m, "--rules", rules, "--baseline", "/")
    assert res.exit_code == 2 and flat("stopped searching /") in flat(res.output)


# --- rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "cause"),
    [
        ("micro.deferred.totl_ms", "unknown stage 'totl'"),
        ("mciro.speedup", "unknown metric 'mciro.speedup'"),
        ("micro.lazy.total_ms", "unknown arm 'lazy'"),
        ("serve_ab.fast.deferred.ttft_ms", "unknown metric"),
    ],
)
def test_unknown_metric_is_a_usage_error(tmp_path, metric, cause):
    p = tmp_path / "r.toml"
    p.write_text(f'[baseline]\nmetrics = ["{metric}"]\n')
    res = gate(reports.put(reports.micro(), tmp_path / "m"), "--rules", p)
    assert res.exit_code == 2 and flat(cause) in flat(res.output)


def test_metric_the_report_lacks_fails_even_without_baseline(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text('[baseline]\nmetrics = ["micro.zero-copy.total_ms"]\n')
    code, rows = gate_rows(tmp_path, reports.put(reports.micro(), tmp_path / "m"), "--rules", p)
    assert code == 1  # the run has no zero-copy arm
    assert rows["baseline.micro.zero-copy.total_ms"] == (
        "fail",
        "this report has no metric micro.zero-copy.total_ms",
    )


# --- report files -------------------------------------------------------------------------


def test_kind_run_is_refused_with_a_hint(tmp_path, rules):
    raw = reports.micro() | {"kind": "run"}
    res = gate(reports.put(raw, tmp_path / "r"), "--rules", rules)
    assert res.exit_code == 2
    assert flat("kind 'run'") in flat(res.output) and flat("one report per scenario") in flat(
        res.output
    )


def test_string_schema_version_is_a_type_error_not_newer(tmp_path, rules):
    raw = reports.micro() | {"schema_version": "1"}
    res = gate(reports.put(raw, tmp_path / "r"), "--rules", rules)
    assert res.exit_code == 2
    assert flat("schema_version must be an integer, got '1' (str)") in flat(res.output)
    assert "newer" not in res.output


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        ("summary", {"speedup_median": "9.0"}, "field summary.speedup_median"),
        ("summary", {"bit_exact_all_repeats": "yes"}, "field summary.bit_exact_all_repeats"),
        ("arms", None, "field arms.deferred.total_ms.samples[1]"),
        ("summary", {"error": 3}, "field summary.error"),
    ],
)
def test_field_of_the_wrong_type_names_report_and_field(tmp_path, rules, where, value, field):
    raw = reports.micro()
    if value is None:
        raw["arms"]["deferred"]["total_ms"]["samples"][1] = "10.5"
    else:
        raw[where] |= value
    path = reports.put(raw, tmp_path / "r")
    res = gate(path, "--rules", rules)
    assert res.exit_code == 2
    assert flat(field) in flat(res.output) and flat(str(path)) in flat(res.output)


def test_serve_string_delta_is_refused(tmp_path, rules):
    raw = reports.serve()
    raw["ab"]["inf"]["deferred"]["median_ttft"]["delta_pct"] = "-20"
    res = gate(reports.put(raw, tmp_path / "s"), "--rules", rules)
    assert res.exit_code == 2
    assert flat("field ab.inf.deferred.median_ttft.delta_pct") in flat(res.output)
    earlier = reports.serve() | {"ab": {"inf": {"median_ttft": {"delta": "-0.2", "ci95": [1, 2]}}}}
    res = gate(reports.put(earlier, tmp_path / "e"), "--rules", rules)
    assert res.exit_code == 2 and flat("field ab.inf.median_ttft.delta") in flat(res.output)


def test_edited_ab_delta_is_refused_as_inconsistent(tmp_path, rules):
    raw = reports.serve()
    raw["ab"]["inf"]["deferred"]["median_ttft"]["delta_pct"] = -80.0  # the rows say -40%
    res = gate(reports.put(raw, tmp_path / "s"), "--rules", rules)
    assert res.exit_code == 2
    assert flat("ab.inf.deferred.median_ttft.delta_pct says -80") in flat(res.output)
    assert flat("disagrees with its raw data") in flat(res.output)


def _inside_the_interval() -> float:
    """A threshold inside the 95% interval of the deferred median TTFT delta."""
    from kimi_bench.ci.evidence_rows import evidence

    c = evidence(Report.from_dict(reports.serve())).serve.ab["inf"]["deferred"]["median_ttft"]
    assert c.interval.low < c.interval.high < 0
    return round((c.interval.low + c.interval.high) / 200.0, 4)


@pytest.mark.parametrize(
    ("limit", "verdict", "code"),
    [(-0.3, "pass", 0), (-0.5, "fail", 1), (None, "inconclusive", 0)],
)
def test_per_rate_serve_rule_decides_on_the_interval(tmp_path, limit, verdict, code):
    limit = _inside_the_interval() if limit is None else limit
    p = tmp_path / "r.toml"
    p.write_text(f"[serve_ab.inf]\nmax_median_ttft_delta = {limit}\n")
    path = reports.put(reports.serve(), tmp_path / "s")  # deferred about -40%
    got, rows = gate_rows(tmp_path, path, "--rules", p)
    assert rows["serve_ab.inf.max_median_ttft_delta"][0] == verdict
    assert got == code


def test_nan_constant_is_refused(tmp_path, rules):
    text = json.dumps(reports.micro()).replace('"speedup_median": 9.0', '"speedup_median": NaN')
    res = gate(reports.put(text, tmp_path / "r"), "--rules", rules)
    assert res.exit_code == 2 and flat("non-standard JSON constant NaN") in flat(res.output)


def test_fifo_report_is_refused_without_blocking(tmp_path, rules):
    os.mkfifo(tmp_path / "report.json")
    res = gate(tmp_path / "report.json", "--rules", rules)
    assert res.exit_code == 2 and flat("is a FIFO (named pipe), not a regular file") in flat(
        res.output
    )


def test_fifo_rules_file_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "rules.toml")
    res = gate(reports.put(reports.micro(), tmp_path / "m"), "--rules", tmp_path / "rules.toml")
    assert res.exit_code == 2 and flat("rules file") in flat(res.output) and "FIFO" in res.output


def test_dev_zero_report_is_refused_without_reading(rules):
    res = gate("/dev/zero", "--rules", rules)
    assert res.exit_code == 2 and flat("is a character device") in flat(res.output)


def test_oversized_report_is_refused(tmp_path, rules, monkeypatch):
    monkeypatch.setattr(model, "MAX_REPORT_BYTES", 1000)
    path = reports.put(reports.micro([10.0] * 200), tmp_path / "m")
    res = gate(path, "--rules", rules)
    assert res.exit_code == 2 and flat("larger than 1,000 bytes") in flat(res.output)


# --- outputs ---------------------------------------------------------------------------------


def test_html_in_a_report_field_is_escaped_in_the_summary(tmp_path, rules):
    evil = "<img src=x onerror=alert(1)>.png"
    path = reports.put(reports.parity(names=(evil, "b.png"), bad=evil), tmp_path / "p")
    summary = tmp_path / "summary.md"
    res = gate(path, "--rules", rules, "--summary", summary)
    assert res.exit_code == 1
    text = summary.read_text()
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)>.png" in text  # no tag opens


def test_summary_below_a_file_is_refused_before_gating(tmp_path, rules):
    (tmp_path / "file").write_text("x")
    path = reports.put(reports.micro(), tmp_path / "m")
    res = gate(path, "--rules", rules, "--summary", tmp_path / "file" / "summary.md")
    assert res.exit_code == 2 and flat("is a file") in flat(res.output)
    assert "micro.complete" not in res.output  # refused before any rule ran


# --- compare -------------------------------------------------------------------------------


def test_compare_refuses_string_numbers_and_kind_run(tmp_path):
    good = reports.put(reports.micro(), tmp_path / "a")
    raw = reports.micro()
    raw["arms"]["eager"]["total_ms"]["samples"] = ["1", "2"]
    bad = reports.put(raw, tmp_path / "b")
    res = CliRunner().invoke(app, ["compare", str(good), str(bad)])
    assert res.exit_code == 2 and flat("field arms.eager.total_ms.samples[") in flat(res.output)
    run = reports.put(reports.micro() | {"kind": "run"}, tmp_path / "c")
    res = CliRunner().invoke(app, ["compare", str(good), str(run)])
    assert res.exit_code == 2 and flat("kind 'run'") in flat(res.output)


# --- reports built in memory (kimi-bench run) ------------------------------------------------


def test_in_memory_reports_are_checked_like_files():
    raw = reports.micro()
    raw["summary"]["speedup_median"] = "9"
    rules = parse_rules({"micro": {"min_speedup": 1}}, Path("r.toml"))
    with pytest.raises(ReportError, match=r"field summary\.speedup_median"):
        evaluate([Report.from_dict(raw)], rules, None)
    other = Report.from_dict(reports.micro() | {"kind": "run"})
    with pytest.raises(ReportError, match=r"kind 'run' is not gated"):
        evaluate([other], rules, None)
