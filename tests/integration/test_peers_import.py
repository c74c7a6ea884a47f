"""``kimi-bench import`` on result files produced by sglang.bench_serving, GuideLLM and
AIPerf against ``kimi-bench serve`` (and a vLLM file in vLLM's save-result layout: see
tests/data/peers/README.md), then ``gate`` and ``compare`` on what it wrote."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from tests.ci_reports import junit_reasons
from tests.peers import fixtures as fx

DATA = Path(__file__).resolve().parents[1] / "data" / "peers"
runner = CliRunner()
RULES = "[serve_ab]\nmax_failed = 0\n"


def imported(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "imp"
    res = runner.invoke(app, ["import", *args, "--output-dir", str(out)])
    assert res.exit_code == 0, res.output
    return json.loads((out / "report.json").read_text())


def gate(tmp_path: Path, report_dir: Path, rules: str = RULES) -> tuple[int, str]:
    """Exit code and the console plus every rule's whole reason (from the JUnit file: piped
    tables fold long reasons inside their cells)."""
    (tmp_path / "rules.toml").write_text(rules)
    junit = tmp_path / "gate.xml"
    res = runner.invoke(
        app,
        ["gate", str(report_dir), "--rules", str(tmp_path / "rules.toml"), "--junit", str(junit)],
    )
    return res.exit_code, res.output + junit_reasons(junit)


@pytest.mark.parametrize(
    ("name", "tool", "version", "per_request"),
    [
        ("sglang-a.jsonl", "sglang.bench_serving", None, True),
        ("vllm-a.json", "vllm bench serve", None, True),
        ("vllm-a-summary.json", "vllm bench serve", None, False),
        ("guidellm-a.json", "guidellm", "0.8.1", True),
        ("aiperf-a.json", "aiperf", "0.13.0", False),
        ("aiperf-a-records.jsonl", "aiperf", None, True),
    ],
)
def test_import_then_gate(tmp_path: Path, name: str, tool: str, version, per_request) -> None:
    rep = imported(tmp_path, str(DATA / name))
    arm = Path(name).stem
    src = rep["config"]["source"]["arms"][arm]
    assert (src["tool"], src["version"], src["per_request"]) == (tool, version, per_request)
    assert rep["config"]["source"]["tools"] == [tool]
    assert rep["environment"]["source"]["tools"] == [tool]
    row = rep["results"][0]
    assert row["completed"] >= 5 and row["failed"] == 0
    if per_request:
        ttfts = [r["ttft_ms"] for r in rep["requests"]]
        assert len(ttfts) == row["completed"]
        assert row["ttft_median_ms"] == pytest.approx(statistics.median(ttfts))
    else:  # nothing invented: no rows, the tool's own percentiles, said in the notes
        assert rep["requests"] == []
        assert any("SUMMARY ONLY" in n for n in rep["notes"])
        assert row["ttft_median_ms"] == row["tool_ttft_median_ms"]
    code, out = gate(tmp_path, tmp_path / "imp")
    assert f"imported: {tool}" in out
    if per_request:
        assert code == 0 and "gate PASS" in out, out
    else:  # max_failed needs rows to count from: it fails by name, never passes on a summary
        assert code == 1 and "summary only: no request rows to count failures from" in out


def test_tool_summary_agrees_with_its_rows(tmp_path: Path) -> None:
    """sglang and GuideLLM state a median TTFT; the rows re-read give the same number."""
    for name, stated in (("sglang-a.jsonl", "median_ttft_ms"), ("guidellm-a.json", None)):
        rep = imported(tmp_path / name, str(DATA / name))
        row = rep["results"][0]
        if stated:
            raw = json.loads((DATA / name).read_text().splitlines()[0])
            assert row["ttft_median_ms"] == pytest.approx(raw[stated], rel=1e-9)
        else:
            raw = json.loads((DATA / name).read_text())
            med = raw["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["median"]
            assert row["ttft_median_ms"] == pytest.approx(med, rel=1e-6)


def test_the_tools_itl_figures_are_its_pooled_gaps(tmp_path: Path) -> None:
    """sglang.bench_serving's mean/median/p99 ITL (np over every gap of its served requests,
    pooled) are what kimi-bench computes from the same per-request lists: the rows keep
    each request's gaps, and the import checks the tool's figures against them."""
    raw = json.loads((DATA / "sglang-a.jsonl").read_text().splitlines()[0])
    rep = imported(tmp_path, str(DATA / "sglang-a.jsonl"))
    gaps = [x for r in rep["requests"] for x in r["itl_ms"]]
    assert len(gaps) == sum(n - 1 for n in raw["output_lens"])  # one gap per later token
    assert statistics.fmean(gaps) == pytest.approx(raw["mean_itl_ms"], rel=1e-9)
    assert statistics.median(gaps) == pytest.approx(raw["median_itl_ms"], rel=1e-9)
    stated = rep["config"]["source"]["arms"]["sglang-a"]["stated"][0]
    assert stated["p99_itl_ms"] == raw["p99_itl_ms"]


@pytest.mark.parametrize("name", ["sglang-a.jsonl", "vllm-a.json"])
@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda o: o["itls"][0].__setitem__(0, 0.5), "mean_itl_ms"),  # one gap made 500 ms
        (lambda o: o.__setitem__("p99_itl_ms", 50.0), "p99_itl_ms"),  # a summary made up
    ],
)
def test_an_itl_the_rows_do_not_give_is_refused(tmp_path: Path, name, edit, says) -> None:
    bad = _broken(tmp_path, name, edit)
    res = runner.invoke(app, ["import", str(bad), "--output-dir", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert f"{says}: {name}'s own summary says" in " ".join(res.output.split())
    assert not (tmp_path / "o" / "report.json").exists()


def test_a_speculative_servers_itl_is_not_held_to_the_chunk_gaps(tmp_path: Path) -> None:
    """With accept_length > 0 sglang reports ITL per retokenized token, not per chunk."""
    bad = _broken(tmp_path, "sglang-a.jsonl", lambda o: o.update(accept_length=2.5,
                                                                 mean_itl_ms=2.7))  # fmt: skip
    rep = imported(tmp_path, str(bad))
    assert "mean_itl_ms" not in rep["config"]["source"]["arms"]["sglang-a"]["stated"][0]
    assert not any("ITL" in n for n in rep["notes"])  # the note claims no ITL check
    rep = imported(tmp_path / "v", str(DATA / "vllm-a.json"))
    assert any("p99 ITL over every gap pooled" in n for n in rep["notes"])


def test_two_files_one_report_is_an_ab(tmp_path: Path) -> None:
    rep = imported(tmp_path, str(DATA / "sglang-a.jsonl"), str(DATA / "sglang-b.jsonl"),
                   "--arm", "base", "--arm", "cand")  # fmt: skip
    assert rep["config"]["arms"] == ["base", "cand"]
    ab = rep["ab"]["inf"]["cand"]["median_ttft"]
    assert ab["a_label"] == "base" and ab["b_label"] == "cand" and ab["delta_pct"] is not None
    assert "vs base" in rep["summary"]["verdict"]
    rules = RULES + '\n[serve_ab."inf"]\nmax_median_ttft_delta = 5.0\n'
    code, out = gate(tmp_path, tmp_path / "imp", rules)
    assert code == 0, out
    assert "serve_ab.inf.max_median_ttft_delta" in out


def test_compare_two_imported_runs(tmp_path: Path) -> None:
    dirs = []
    for name in ("guidellm-a.json", "guidellm-b.json"):
        out = tmp_path / name
        res = runner.invoke(app, ["import", str(DATA / name), "--arm", "guidellm",
                                  "--output-dir", str(out)])  # fmt: skip
        assert res.exit_code == 0, res.output
        dirs.append(out)
    md = tmp_path / "cmp.md"
    res = runner.invoke(app, ["compare", str(dirs[0]), str(dirs[1]), "--markdown", str(md)])
    assert res.exit_code == 0, res.output
    text = md.read_text()
    assert "guidellm" in text and "not comparable" not in res.output
    a = json.loads((dirs[0] / "report.json").read_text())["results"][0]["ttft_median_ms"]
    assert f"{a:.4g}"[:4] in text.replace(",", "")


def test_summary_only_cannot_claim_ttft_deltas(tmp_path: Path) -> None:
    """Two summary-only arms: completeness and failures gate; a TTFT delta rule fails by
    name (no per-request data to compare), it is never passed on summaries."""
    f1 = fx.write("vllm-summary", fx.make_run("inf", seed=1), tmp_path / "s1")
    f2 = fx.write("vllm-summary", fx.make_run("inf", seed=2), tmp_path / "s2")
    rep = imported(tmp_path, str(f1), str(f2), "--arm", "v1", "--arm", "v2")
    assert rep["config"]["per_request"] is False and rep["requests"] == []
    assert rep["ab"]["inf"]["v2"]["median_ttft"] is None
    code, out = gate(tmp_path, tmp_path / "imp", "[serve_ab.inf]\nmin_throughput_delta = -0.5\n")
    assert code == 0, out  # throughput comes from the tool's own counts and duration
    rules = '[serve_ab."inf"]\nmax_median_ttft_delta = 5.0\n'
    code, out = gate(tmp_path, tmp_path / "imp", rules)
    assert code == 1 and "no median_ttft delta" in out


def test_files_at_different_loads_are_refused(tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(DATA / "vllm-a.json"), str(DATA / "aiperf-a.json"),
                              "--output-dir", str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 2
    assert "different loads" in res.output and "label c1" in res.output


def _broken(tmp_path: Path, name: str, edit) -> Path:
    text = (DATA / name).read_text()
    obj = json.loads(text.splitlines()[0] if name.endswith(".jsonl") else text)
    edit(obj)
    out = tmp_path / name
    out.write_text(json.dumps(obj))
    return out


@pytest.mark.parametrize(
    ("name", "edit", "says"),
    [
        ("sglang-a.jsonl", lambda o: o["ttfts"].__setitem__(2, "fast"), "ttfts.2"),
        ("sglang-a.jsonl", lambda o: o.pop("completed"), "completed"),
        ("sglang-a.jsonl", lambda o: o["errors"].pop(), "errors has 5 entries"),
        ("sglang-a.jsonl", lambda o: o.__setitem__("completed", 4), "disagrees with itself"),
        ("vllm-a.json", lambda o: o.__setitem__("num_prompts", -1), "num_prompts"),
        ("guidellm-a.json", lambda o: o["benchmarks"][0].pop("duration"), "duration"),
        ("aiperf-a.json", lambda o: o.__setitem__("time_to_first_token", 3), "time_to_first_token"),
    ],
)
def test_malformed_files_exit_2_naming_the_field(tmp_path: Path, name, edit, says) -> None:
    bad = _broken(tmp_path, name, edit)
    res = runner.invoke(app, ["import", str(bad), "--output-dir", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert says in res.output and str(bad.name) in res.output
    assert not (tmp_path / "o" / "report.json").exists()


@pytest.mark.parametrize("text", ["", "[1, 2]", "{not json", '{"hello": 1}'])
def test_unknown_files_exit_2(tmp_path: Path, text: str) -> None:
    f = tmp_path / "x.json"
    f.write_text(text)
    res = runner.invoke(app, ["import", str(f), "--output-dir", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert "x.json" in res.output


def test_arm_names_must_match_files(tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(DATA / "sglang-a.jsonl"), "--arm", "a", "--arm", "b",
                              "--output-dir", str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 2 and "--arm given 2 times for 1 files" in res.output


def test_sglang_without_details_is_summary_only_and_not_complete(tmp_path: Path) -> None:
    """sglang without --output-details (the same line minus its detail lists) states no
    failure count: imported honestly, and the gate cannot call the run complete."""
    details = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")
    f = _broken(tmp_path, "sglang-a.jsonl", lambda o: [o.pop(k) for k in details])
    rep = imported(tmp_path, str(f))
    assert rep["config"]["per_request"] is False and rep["results"][0]["failed"] is None
    assert any("does not count failed requests" in n for n in rep["notes"])
    code, out = gate(tmp_path, tmp_path / "imp")
    assert code == 1 and "does not say how many requests failed" in out
