"""Issue 31: peers' files through the installed ``kimi-bench import`` keep what they mean
(load, the tool's own figures, summary-only-ness) and cannot lie to ``gate`` or
``compare``; exit code and message asserted for each case."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.bad_inputs.test_inputs_that_lie import kb, rules
from tests.peers import fixtures as fx

DATA = Path(__file__).resolve().parents[1] / "data" / "peers"


def _first(name: str) -> dict[str, Any]:
    text = (DATA / name).read_text()
    return json.loads(text.splitlines()[0] if name.endswith(".jsonl") else text)


def _write(obj: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj) + "\n")
    return path


def _imported(tmp_path: Path, *args: str | Path) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "imp"
    code, text = kb("import", *args, "--output-dir", out)
    assert code == 0, text
    return out, json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_a_concurrency_limit_is_a_load_not_a_burst(tmp_path: Path) -> None:
    """--max-concurrency 1 runs of sglang.bench_serving and vllm bench serve are labelled
    c1 (not inf), carry their load, and compare calls c1 vs a burst not comparable (the
    sglang file at max_concurrency 1 that in fact ran a burst is tests.peers.lies's)."""
    c1_run = fx.make_run("c1")
    sg = fx.write("sglang", c1_run, tmp_path / "sg-c1")
    vl = fx.write("vllm", c1_run, tmp_path / "vl-c1")
    c1, rep = _imported(tmp_path / "s", sg, "--arm", "x")
    assert rep["config"]["rate_labels"] == ["c1"] and rep["results"][0]["rate"] == "c1"
    assert rep["config"]["load"]["max_concurrency"] == 1
    assert rep["config"]["load"]["unlimited_rate"] is True
    _, rep = _imported(tmp_path / "v", vl)
    assert rep["config"]["rate_labels"] == ["c1"] and rep["config"]["load"]["burstiness"] == 1.0
    burst, _ = _imported(tmp_path / "b", DATA / "sglang-a.jsonl", "--arm", "x")
    code, out = kb("compare", burst, c1)
    assert code == 0
    assert "not comparable: load (rate labels) differs: A ['inf'], B ['c1']" in out
    assert "significant" not in out.replace("no delta is called significant", "")


@pytest.mark.slow
def test_aiperf_export_and_records_of_one_run_get_one_label(tmp_path: Path) -> None:
    run = tmp_path / "aiperf-out"  # AIPerf's artifact folder: both files under its names
    run.mkdir()
    shutil.copy(DATA / "aiperf-a.json", run / "profile_export_aiperf.json")
    shutil.copy(DATA / "aiperf-a-records.jsonl", run / "profile_export.jsonl")
    _, export = _imported(tmp_path / "e", run / "profile_export_aiperf.json")
    _, records = _imported(tmp_path / "r", run / "profile_export.jsonl")
    assert export["config"]["rate_labels"] == records["config"]["rate_labels"] == ["c1"]
    assert records["config"]["per_request"] is True and export["config"]["per_request"] is False
    # the records are checked against the export's own figures beside them
    stated = records["config"]["source"]["arms"]["profile_export"]["stated"][0]
    assert stated["completed"] == 5.0 and stated["median_ttft_ms"] > 0


@pytest.mark.slow
def test_rows_made_faster_under_the_tool_summary_are_refused(tmp_path: Path) -> None:
    sg = _first("sglang-a.jsonl")
    sg["ttfts"] = [t / 10 for t in sg["ttfts"]]  # the summary (mean 967.5 ms) kept
    code, out = kb("import", _write(sg, tmp_path / "fast.jsonl"), "--output-dir", tmp_path / "o")
    assert code == 2
    assert (
        "fast.jsonl's own summary says 967.451 ms but its per-request rows give 96.7451 ms" in out
    )
    assert not (tmp_path / "o" / "report.json").exists()
    gl = _first("guidellm-a.json")
    for r in gl["benchmarks"][0]["requests"]["successful"]:
        r["time_to_first_token_ms"] /= 10
    code, out = kb("import", _write(gl, tmp_path / "gl.json"), "--output-dir", tmp_path / "o2")
    assert code == 2 and "gl.json's own summary says 250.263 ms" in out
    sg = _first("sglang-a.jsonl") | {"completed": 4}  # the count the rows contradict
    code, out = kb("import", _write(sg, tmp_path / "c.jsonl"), "--output-dir", tmp_path / "o3")
    assert code == 2 and "completed says 4 but the per-request lists show 6" in out


@pytest.mark.slow
def test_an_imported_report_is_protected_like_a_measured_one(tmp_path: Path) -> None:
    base, _ = _imported(tmp_path / "a", DATA / "sglang-a.jsonl", "--arm", "x")
    cand, rep = _imported(tmp_path / "b", DATA / "sglang-b.jsonl", "--arm", "x")
    for row in rep["requests"]:
        row["ttft_ms"] /= 10  # the rows edited, the per-arm row and the tool's figures kept
    (cand / "report.json").write_text(json.dumps(rep))
    lax = rules(tmp_path, "[serve_ab]\nmax_failed = 0\n")
    code, out = kb("gate", cand, "--rules", lax)
    assert (
        code == 2 and "results[0].ttft_mean_ms says 873.507 but the raw data gives 87.3507" in out
    )
    assert "PASS" not in out
    code, out = kb("compare", base, cand)
    assert code == 2 and "-90" not in out
    # the per-arm row rewritten to match: the tool's own figures still disagree
    row = rep["results"][0]
    for key in [k for k in row if k.startswith(("ttft_", "e2e_", "tpot_"))]:
        row.pop(key)  # kimi-bench's own figures dropped: the rows give them anew
    ttfts = sorted(r["ttft_ms"] for r in rep["requests"])
    row["ttft_mean_ms"] = sum(ttfts) / len(ttfts)
    row["ttft_median_ms"] = (ttfts[2] + ttfts[3]) / 2
    row["ttft_p90_ms"] = ttfts[4] + 0.5 * (ttfts[5] - ttfts[4])
    row["ttft_p99_ms"] = ttfts[4] + 0.95 * (ttfts[5] - ttfts[4])
    (cand / "report.json").write_text(json.dumps(rep))
    code, out = kb("gate", cand, "--rules", lax)
    assert code == 2 and "config.source.arms.x.stated[0]" in out
    assert "the rows disagree with the tool's summary" in out


@pytest.mark.slow
def test_a_summary_only_file_is_imported_as_such_and_refused_by_rules_that_need_rows(tmp_path):
    out_dir, rep = _imported(tmp_path, DATA / "aiperf-a.json")
    assert rep["config"]["per_request"] is False and rep["requests"] == []
    assert any("SUMMARY ONLY" in n for n in rep["notes"])
    code, out = kb("gate", out_dir, "--rules", rules(tmp_path, "[serve_ab]\nmax_failed = 0\n"),
                   "--format", "md")  # fmt: skip
    assert code == 1 and "summary only: no request rows to count failures from" in out


@pytest.mark.slow
def test_max_failed_counts_what_the_file_shows(tmp_path: Path) -> None:
    run = fx.make_run("inf", failed=1)  # one request failed, as sglang writes it: ttft 0, error
    out_dir, _ = _imported(tmp_path / "f", fx.write("sglang", run, tmp_path / "f"))
    strict = rules(tmp_path, "[serve_ab]\nmax_failed = 0\n")
    code, out = kb("gate", out_dir, "--rules", strict, "--format", "md")
    assert code == 1 and "| serve_ab.max_failed | 1 | fail | 1 failed requests |" in out
    out_dir, _ = _imported(tmp_path / "b", fx.write("sglang-summary", run, tmp_path / "bare"))
    code, out = kb("gate", out_dir, "--rules", strict, "--format", "md")
    assert code == 1 and "summary only: no request rows to count failures from" in out


@pytest.mark.slow
def test_a_one_arm_import_says_why_it_has_no_delta(tmp_path: Path) -> None:
    sg = _first("sglang-a.jsonl") | {"request_rate": 4}
    out_dir, rep = _imported(tmp_path, _write(sg, tmp_path / "r4.jsonl"))
    assert rep["config"]["rate_labels"] == ["4"]
    rule = rules(tmp_path, "[serve_ab.4]\nmax_median_ttft_delta = 0.0\n")
    code, out = kb("gate", out_dir, "--rules", rule, "--format", "md")
    assert code == 1
    assert "rate 4 has one arm (r4): no A/B delta to check" in out
    assert "rate 4 not in the report" not in out


@pytest.mark.slow
def test_a_rule_on_an_absent_rate_is_skipped_for_every_format(tmp_path: Path) -> None:
    """Skipped where the report records its load; failed by name where it does not."""
    rule = rules(
        tmp_path, "[serve_ab]\nmax_failed = 100\n[serve_ab.8]\nmin_throughput_delta = -0.5\n"
    )
    for name in ("sglang-a.jsonl", "aiperf-a.json", "aiperf-a-records.jsonl", "guidellm-a.json"):
        out_dir, rep = _imported(tmp_path / name, DATA / name)
        code, out = kb("gate", out_dir, "--rules", rule, "--format", "md")
        label = rep["config"]["rate_labels"][0]
        if label == "unrecorded":  # AIPerf's records alone: rate 8 may be what it ran
            assert code == 1 and "| fail | the report does not record its load" in out, out
            continue
        skip = f"| skip | rate 8 was not run (this run's rates: {label}) |"
        assert code in (0, 1) and skip in out, out


@pytest.mark.slow
def test_recomputed_throughput_is_shown_beside_the_tools_own(tmp_path: Path) -> None:
    _, rep = _imported(tmp_path, DATA / "guidellm-a.json")
    row = rep["results"][0]
    tool = _first("guidellm-a.json")["benchmarks"][0]["metrics"]["requests_per_second"]
    assert row["tool_req_per_s"] == tool["successful"]["mean"]
    assert row["req_per_s"] == row["completed"] / row["duration_s"]  # kimi-bench's own
    assert any("req_per_s is RECOMPUTED" in n and "tool_req_per_s is the tool's own" in n
               for n in rep["notes"])  # fmt: skip
    code, out = kb("import", DATA / "guidellm-a.json", "--output-dir", tmp_path / "again")
    assert code == 0 and "tool_req_per_s" in out and f"{row['tool_req_per_s']:.4g}" in out
