"""Issue 21's matrix: edited, inconsistent, negative, infinite, crashed and empty runs, bad
rules, missing or mismatched baselines. Each gets the promised exit code (2: the input
cannot be trusted or used; 1: the run failed), never PASS, never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from tests import ci_reports
from tests.bad_inputs import reports

RULES = """
[parity]
all_bit_exact = true
[micro]
bit_exact = true
min_speedup = 1.0
[serve_ab]
max_failed = 0
"""


def flat(text: str) -> str:
    return "".join(text.split())


def gate(*args: str | Path) -> tuple[int, str]:
    """Exit code and what the user sees: the console, plus every rule's reason whole (from
    the JUnit file: piped tables fold long reasons inside their cells)."""
    junit = Path(tempfile.mkdtemp()) / "gate.xml"
    res = CliRunner().invoke(app, ["gate", *map(str, args), "--junit", str(junit)])
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output + ci_reports.junit_reasons(junit)


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    p = tmp_path / "rules.toml"
    p.write_text(RULES)
    return p


# --- edited and inconsistent reports: exit 2 naming the field ------------------------------


def _negative_times(raw: dict) -> None:
    for rec in raw["repeats"]["deferred"]:
        rec["total_ms"] = -rec["total_ms"]
    block = raw["arms"]["deferred"]["total_ms"]
    block["samples"] = [-x for x in block["samples"]]


def _all_repeats_differ(raw: dict) -> None:
    for rec in raw["repeats"]["deferred"]:
        rec["bit_exact"] = False  # summary still says bit_exact_all_repeats = true


def _speedup_edited(raw: dict) -> None:
    raw["summary"]["speedup_median"] = 50.0


def _median_edited(raw: dict) -> None:
    raw["summary"]["deferred_median_ms"] = 1.0


def _bytes_edited(raw: dict) -> None:
    raw["summary"]["bytes_ratio"] = 40.0


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_negative_times, "is less than the minimum of 0"),
        (_all_repeats_differ, "summary.bit_exact_all_repeats says True"),
        (_speedup_edited, "summary.speedup_median says 50"),
        (_median_edited, "summary.deferred_median_ms says 1"),
        (_bytes_edited, "summary.bytes_ratio says 40"),
    ],
)
def test_edited_micro_report_is_refused(tmp_path, rules, edit, field):
    raw = reports.micro()
    edit(raw)
    code, out = gate(reports.put(raw, tmp_path / "m"), "--rules", rules)
    assert code == 2
    assert flat(field) in flat(out)
    assert "PASS" not in out


def test_infinite_speedup_is_refused(tmp_path, rules):
    text = json.dumps(reports.micro())
    text = text.replace('"speedup_median": 9.0', '"speedup_median": 1e999')
    assert "1e999" in text
    code, out = gate(reports.put(text, tmp_path / "m"), "--rules", rules)
    assert code == 2 and flat("field summary.speedup_median") in flat(out)


def _http_500_without_counting(raw: dict) -> None:
    for row in [r for r in raw["requests"] if r["arm"] == "deferred"][:3]:
        row["status"] = 500  # failed_requests stays 0, completed stays 4


def _negative_failed(raw: dict) -> None:
    raw["summary"]["failed_requests"] = -3


def _ttft_negative(raw: dict) -> None:
    raw["requests"][0]["ttft_ms"] = -5.0


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_http_500_without_counting, "completed says 4"),
        (_negative_failed, "field summary.failed_requests"),
        (_ttft_negative, "field requests[0].ttft_ms"),
    ],
)
def test_edited_serve_report_is_refused(tmp_path, rules, edit, field):
    raw = reports.serve()
    edit(raw)
    code, out = gate(reports.put(raw, tmp_path / "s"), "--rules", rules)
    assert code == 2
    assert flat(field) in flat(out)


def test_failed_requests_counted_from_rows_fail_the_rule(tmp_path, rules):
    rep = ci_reports.serve(
        {"eager": [100.0] * 4, "deferred": [60.0] * 4}, fail={"deferred": {0, 1}}
    )
    code, out = gate(ci_reports.put(rep, tmp_path / "s"), "--rules", rules)
    assert code == 1
    assert flat("serve_ab.max_failed") in flat(out) and flat("2 failed requests") in flat(out)


# --- crashed and partial runs: exit 1, the reason named -----------------------------------


def test_report_a_crashed_serve_ab_left_behind_fails(tmp_path, rules):
    raw = reports.serve()
    raw["requests"] = [r for r in raw["requests"] if r["arm"] == "eager"]  # one arm ran
    raw["results"] = [r for r in raw["results"] if r["arm"] == "eager"]
    raw["ab"] = {}
    raw["final"] = False  # the partial write during the run
    code, out = gate(reports.put(raw, tmp_path / "s"), "--rules", rules)
    assert code == 1
    assert flat("rate inf, deferred, repeat 0: 0 of 4 requests") in flat(out)
    assert flat("not marked final") in flat(out)


def test_micro_with_missing_repeats_fails(tmp_path, rules):
    rep = ci_reports.micro([10.0, 10.2, 9.9], 5.0, planned=5)
    code, out = gate(ci_reports.put(rep, tmp_path / "m"), "--rules", rules)
    assert code == 1 and flat("deferred: 3 of 5 repeats") in flat(out)


# --- rules files: exit 2 with file, table and key -------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[micro]\nmin_speedup = nan\n", "[micro] min_speedup"),
        ("[micro]\nmin_speedup = inf\n", "[micro] min_speedup"),
        ("[baseline]\nmax_regression = nan\n", "[baseline] max_regression"),
        ("[baseline]\nalpha = nan\n", "[baseline] alpha"),
        ("[baseline]\nalpha = 7\n", "[baseline] alpha"),
        ("[baseline]\nmax_regression = -5.0\n", "[baseline] max_regression"),
        ("micro = true\n", "[micro]"),
        ("[speed]\nmin = 1\n", "[speed]"),
        ("[serve_ab.inf]\nmax_median_ttft_delta = -3\n", "[serve_ab.inf] max_median_ttft_delta"),
        ("[serve_ab.fast]\nmax_median_ttft_delta = -0.1\n", "[serve_ab.fast]"),
        ("[micro]\nbit_exact = 1\n", "[micro] bit_exact"),
        ("inconclusive = 'maybe'\n", "inconclusive"),
    ],
)
def test_bad_rules_are_refused(tmp_path, text, where):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    code, out = gate(reports.put(reports.micro(), tmp_path / "m"), "--rules", p)
    assert code == 2
    assert flat(str(p)) in flat(out) and flat(where) in flat(out)


def test_rules_that_gate_nothing_fail(tmp_path):
    p = tmp_path / "empty.toml"
    p.write_text("# nothing\n")
    code, out = gate(reports.put(reports.micro(), tmp_path / "m"), "--rules", p)
    assert code == 1 and flat("no rule was evaluated") in flat(out)


# --- baselines: an explicit --baseline must exist and match ----------------------------------


def test_missing_baseline_without_baseline_rules_is_a_usage_error(tmp_path, rules):
    code, out = gate(reports.put(reports.micro(), tmp_path / "m"), "--rules", rules,
                     "--baseline", tmp_path / "no" / "such")  # fmt: skip
    assert code == 2 and flat("does not exist") in flat(out)


def _baseline_rules(tmp_path: Path) -> Path:
    p = tmp_path / "rel.toml"
    p.write_text('[baseline]\nmetrics = ["micro.speedup"]\n')
    return p


def test_baseline_of_another_kind_is_a_usage_error(tmp_path):
    m = reports.put(reports.micro(), tmp_path / "m")
    s = reports.put(reports.serve(), tmp_path / "s")
    code, out = gate(m, "--rules", _baseline_rules(tmp_path), "--baseline", s)
    assert code == 2 and flat("a serve-ab report") in flat(out)


def test_baseline_of_another_image_spec_is_a_usage_error(tmp_path):
    m = ci_reports.put(ci_reports.micro([10.0] * 4, 5.0), tmp_path / "m")
    other = ci_reports.micro([10.0] * 4, 5.0, groups="2x640x480")
    base = ci_reports.put(other, tmp_path / "base")
    code, out = gate(m, "--rules", _baseline_rules(tmp_path), "--baseline", base)
    assert code == 2
    assert flat("not comparable (groups") in flat(out)


def test_baseline_of_another_device_is_a_usage_error(tmp_path):
    m = ci_reports.put(ci_reports.micro([10.0] * 4, 5.0), tmp_path / "m")
    raw = ci_reports.micro([10.0] * 4, 5.0).to_dict()
    raw["environment"] |= {"device": "cuda", "device_name": "NVIDIA H200"}
    base = ci_reports.put(raw, tmp_path / "base")
    code, out = gate(m, "--rules", _baseline_rules(tmp_path), "--baseline", base)
    assert code == 2 and flat("device 'cpu' vs 'cuda'") in flat(out)


def test_report_as_its_own_baseline_is_a_usage_error(tmp_path):
    m = reports.put(reports.micro(), tmp_path / "m")
    code, out = gate(m, "--rules", _baseline_rules(tmp_path), "--baseline", m)
    assert code == 2 and flat("is the gated report itself") in flat(out)


def test_same_setup_baseline_is_used_and_a_20pct_slowdown_fails(tmp_path):
    base = ci_reports.put(ci_reports.micro([10.0 + 0.01 * i for i in range(10)], 5.0),
                          tmp_path / "base")  # fmt: skip
    slow = ci_reports.micro([12.0 + 0.01 * i for i in range(10)], 5.0 / 1.2)
    code, out = gate(ci_reports.put(slow, tmp_path / "m"), "--rules", _baseline_rules(tmp_path),
                     "--baseline", base)  # fmt: skip
    assert code == 1 and flat("baseline.micro.speedup") in flat(out) and "-16.7%" in out


# --- an empty scenario runs nothing: refused -------------------------------------------------


def test_empty_scenario_is_refused(tmp_path):
    sc = tmp_path / "empty.toml"
    sc.write_text("[run]\ndescription = 'nothing'\n")
    res = CliRunner().invoke(app, ["run", "--scenario", str(sc), "--output-dir",
                                   str(tmp_path / "out")])  # fmt: skip
    assert res.exit_code == 2 and flat("the scenario runs nothing") in flat(res.output)


# --- compare across devices -------------------------------------------------------------------


def test_compare_across_devices_is_not_comparable(tmp_path):
    a = ci_reports.put(ci_reports.micro([10.0] * 5, 5.0), tmp_path / "a")
    raw = ci_reports.micro([1.0] * 5, 5.0).to_dict()
    raw["environment"] |= {"device": "cuda", "device_name": "NVIDIA H200"}
    b = ci_reports.put(raw, tmp_path / "b")
    md = tmp_path / "cmp.md"
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--markdown", str(md)])
    assert res.exit_code == 0
    assert flat("not comparable: device differs: A 'cpu', B 'cuda'") in flat(res.output)
    rows = [line for line in md.read_text().splitlines() if line.startswith("| deferred")]
    assert rows and all("not comparable: device 'cpu' vs 'cuda'" in r for r in rows)


def test_rate_rule_for_a_rate_not_run_is_skipped_not_failed(tmp_path):
    """A scenario of one's own may run other rates than the rules name: skipped, saying so;
    a planned rate that is missing still fails (completeness)."""
    p = tmp_path / "r.toml"
    p.write_text("[serve_ab]\nmax_failed = 0\n[serve_ab.4]\nmax_median_ttft_delta = 0.5\n")
    code, out = gate(reports.put(reports.serve(), tmp_path / "s"), "--rules", p)
    assert code == 0
    assert flat("rate 4 was not run (this run's rates: inf)") in flat(out)


def test_only_skipped_rules_check_nothing(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text("[serve_ab.4]\nmax_median_ttft_delta = 0.5\n")
    code, out = gate(reports.put(reports.serve(), tmp_path / "s"), "--rules", p)
    assert code == 1 and flat("no rule was evaluated") in flat(out)
