"""The gate on hand-built reports: every verdict is checked against known inputs."""

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench import SCHEMA_VERSION
from kimi_bench.ci.baseline import mann_whitney_greater
from kimi_bench.ci.gate import evaluate
from kimi_bench.ci.rules import RulesError, load_rules, parse_rules
from kimi_bench.cli.main import app
from kimi_bench.report.model import Report
from tests import ci_reports

runner = CliRunner()


def parity_report(bad: str | None = None) -> Report:
    return ci_reports.parity(("a.png", "b.jpg", "c.png"), bad)


def micro_report(samples_ms: list[float], speedup: float = 5.0, ranks: int = 2) -> Report:
    return ci_reports.micro(samples_ms, speedup, ranks=ranks)


def write(report: Report, path: Path) -> Path:
    return ci_reports.put(report, path)


RULES = parse_rules(
    {
        "parity": {"all_bit_exact": True},
        "micro": {"min_speedup": 8, "bit_exact": True, "min_bytes_ratio": 3},
        "baseline": {"max_regression": 0.10, "alpha": 0.05, "metrics": ["micro.deferred.total_ms"]},
    },
    Path("rules.toml"),
)


def test_parity_with_one_differing_image_fails_naming_it():
    res = evaluate([parity_report(bad="b.jpg")], RULES, None)
    (rule,) = [r for r in res if r.rule == "parity.all_bit_exact"]
    assert rule.verdict == "fail" and "b.jpg" in rule.reason
    assert evaluate([parity_report()], RULES, None)[0].verdict == "pass"


def test_micro_speedup_below_the_rule_fails():
    res = {r.rule: r for r in evaluate([micro_report([10.0] * 5, speedup=4.1)], RULES, None)}
    assert res["micro.min_speedup"].verdict == "fail"
    assert res["micro.min_speedup"].measured == 4.1
    assert res["micro.bit_exact"].verdict == "pass"
    assert res["micro.min_bytes_ratio"].verdict == "pass"
    assert res["baseline.micro.deferred.total_ms"].verdict == "skip"  # no baseline given
    assert "4.10x" in res["micro.min_speedup"].reason


def _tight(center: float, n: int = 20, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-0.01, 0.01)) for _ in range(n)]


def test_baseline_30_percent_slower_fails_3_percent_passes(tmp_path):
    base = write(micro_report(_tight(10.0)), tmp_path / "base")
    slow = micro_report(_tight(13.0, seed=1))
    res = {r.rule: r for r in evaluate([slow], RULES, base.parent)}
    rel = res["baseline.micro.deferred.total_ms"]
    assert rel.verdict == "fail" and rel.measured == pytest.approx(0.30, abs=0.02)
    near = micro_report(_tight(10.3, seed=2))
    rel = {r.rule: r for r in evaluate([near], RULES, base.parent)}[
        "baseline.micro.deferred.total_ms"
    ]
    assert rel.verdict == "pass"


def test_a_large_but_noisy_shift_is_not_a_regression(tmp_path):
    base = write(micro_report([5.0, 20.0, 8.0]), tmp_path / "base")
    noisy = micro_report([6.0, 25.0, 9.0])  # +25% median, 3 wild samples each
    rel = {r.rule: r for r in evaluate([noisy], RULES, base.parent)}[
        "baseline.micro.deferred.total_ms"
    ]
    assert rel.verdict == "pass" and "p = " in rel.reason


def test_mann_whitney_direction():
    assert mann_whitney_greater([10, 11, 12, 13, 14], [1, 2, 3, 4, 5]) < 0.01
    assert mann_whitney_greater([1, 2, 3, 4, 5], [10, 11, 12, 13, 14]) > 0.99


def test_rules_validation(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text("[micro]\nmin_sppedup = 3\n")
    with pytest.raises(RulesError, match=r"\[micro\] min_sppedup: unknown rule or table"):
        load_rules(p)
    p.write_text("[micro]\nmin_speedup = 'fast'\n")
    with pytest.raises(RulesError, match=r"\[micro\] min_speedup: Input should be a valid number"):
        load_rules(p)


def test_cli_gate_exit_codes_and_junit(tmp_path):
    good = write(parity_report(), tmp_path / "good")
    bad = write(parity_report(bad="c.png"), tmp_path / "bad")
    junit, summary = tmp_path / "gate.xml", tmp_path / "summary.md"
    res = runner.invoke(app, ["gate", str(good), str(tmp_path / "m"), "--junit", str(junit)])
    assert res.exit_code == 2  # missing report
    write(micro_report([10.0] * 4, speedup=9.0), tmp_path / "m")
    res = runner.invoke(
        app,
        [
            "gate",
            str(good),
            str(tmp_path / "m"),
            "--junit",
            str(junit),
            "--summary",
            str(summary),
        ],
    )
    # the default rules' regression rules found no baseline: not a plain PASS (issue 42)
    assert res.exit_code == 5, res.output
    assert "gate NO REGRESSION CHECK" in summary.read_text()
    res = runner.invoke(app, ["gate", str(good), str(tmp_path / "m"), "--junit", str(junit),
                              "--summary", str(summary), "--allow-no-baseline"])  # fmt: skip
    assert res.exit_code == 0, res.output
    root = ET.parse(junit).getroot()
    cases = root.findall("testcase")
    assert root.tag == "testsuite" and int(root.get("tests")) == len(cases) >= 5
    names = {(c.get("classname"), c.get("name")) for c in cases}
    assert len(names) == len(cases)  # one case per rule and report
    assert "gate PASS with no regression check" in summary.read_text()
    res = runner.invoke(app, ["gate", str(bad)])
    assert res.exit_code == 1 and "c.png" in res.output


def test_newer_schema_and_wrong_kind_exit_2(tmp_path):
    d = tmp_path / "future"
    d.mkdir()
    (d / "report.json").write_text(
        json.dumps({"schema_version": SCHEMA_VERSION + 1, "kind": "parity", "results": []})
    )
    res = runner.invoke(app, ["gate", str(d)])
    assert res.exit_code == 2
    assert "newer than this kimi-bench understands" in res.output
    (d / "report.json").write_text(json.dumps({"schema_version": 1, "kind": "fps"}))
    res = runner.invoke(app, ["gate", str(d)])
    assert res.exit_code == 2 and "kind 'fps'" in res.output


def test_compare_refuses_mismatched_kinds(tmp_path):
    a = write(parity_report(), tmp_path / "a")
    b = write(micro_report([1.0, 2.0]), tmp_path / "b")
    res = runner.invoke(app, ["compare", str(a), str(b)])
    assert res.exit_code == 2 and "cannot compare" in res.output
    c = write(micro_report([1.0, 1.1, 1.2]), tmp_path / "c")
    md = tmp_path / "cmp.md"
    res = runner.invoke(app, ["compare", str(b), str(c), "--markdown", str(md)])
    assert res.exit_code == 0, res.output
    assert "| deferred | TOTAL |" in md.read_text()
