"""``kimi-bench serve-ab --endpoint`` run as a user runs it (a subprocess) against a
third-party OpenAI-compatible server (``tests/peers/bad_server.py``: no kimi-bench batch
header) that misbehaves in one way per URL path. Every misbehaviour is a counted failure
of its own arm, with its reason; the report on disk has every arm; no traceback."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kimi_bench.infra.stats.compare import SIGNIFICANT, STRADDLES_ZERO
from kimi_bench.serving.launch import free_port
from tests.peers import bad_server

FIGURES = ("ttft_vs_rate.png", "throughput.png", "ttft_cdf.png", "stage_waterfall.png")
SMALL = ["--num-prompts", "6", "--request-rate", "inf", "--warmup-requests", "1"]


@pytest.fixture(scope="module")
def peer() -> Iterator[str]:
    with bad_server.running(free_port()) as url:
        yield url


def serve_ab(out: Path, *args: str, timeout: float = 300) -> tuple[int, str, dict[str, Any]]:
    """``kimi-bench serve-ab ARGS --output-dir OUT``: exit code, console text, report."""
    argv = [sys.executable, "-m", "kimi_bench.cli.main", "serve-ab", *args]
    argv += ["--output-dir", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    report = out / "report.json"
    return proc.returncode, text, json.loads(report.read_text()) if report.exists() else {}


def figures_in(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("*.png") if p.stat().st_size > 1000)


EXPECTED = {  # mode -> the failure kind each of its requests must end with
    "http500": "http",
    "http429": "http",
    "badsse": "malformed",
    "nonjson": "malformed",
    "errorevent": "server_error",
    "drop": "truncated",
    "truncate": "truncated",
    "stallheaders": "timeout",
    "stalltoken": "timeout",
    "stallstream": "timeout",
}


@pytest.mark.slow
def test_every_misbehaving_endpoint_is_a_complete_arm_of_counted_failures(
    peer: str, tmp_path: Path
) -> None:
    args = ["--endpoint", f"ok={peer}/ok"]
    for mode in EXPECTED:
        args += ["--endpoint", f"{mode}={peer}/{mode}"]
    args += [*SMALL, "--max-tokens", "4", "--request-timeout", "2"]
    rc, text, report = serve_ab(tmp_path, *args)
    assert rc == 1, text  # failed requests: the comparison does not stand
    arms = ["ok", *EXPECTED]
    assert report["summary"]["arms"] == arms and report["config"]["arms"] == arms
    rows = {r["arm"]: r for r in report["results"]}
    assert rows["ok"]["completed"] == 6 and rows["ok"]["failed"] == 0
    failures = report["summary"]["failures"]
    for mode, kind in EXPECTED.items():
        assert rows[mode]["completed"] == 0 and rows[mode]["failed"] == 6, mode
        assert failures[mode]["kinds"] == {kind: 6}, failures[mode]
        reqs = [r for r in report["requests"] if r["arm"] == mode]
        assert len(reqs) == 6 and all(r["error_kind"] == kind and r["error"] for r in reqs)
    assert report["summary"]["failed_requests"] == 6 * len(EXPECTED)
    modes = ("ok", "truncate", "stallheaders", "stalltoken", "stallstream", "http429")
    by = {m: [r for r in report["requests"] if r["arm"] == m] for m in modes}
    # the truncating server sent a token and no finish: never a success, its bytes counted
    for r in by["truncate"]:
        assert r["token_chunks"] == 1 and r["finish_reason"] is None and not r["done_marker"]
        assert r["bytes_received"] > 0 and r["ttft_ms"] is None
    for r in by["ok"]:
        assert r["finish_reason"] == "length" and r["done_marker"] and r["token_chunks"] == 4
        order = [r[f"{k}_s"] for k in ("scheduled", "sent", "first_byte", "first_token", "end")]
        assert order == sorted(order), r
    # --request-timeout covers each point a server can stall at, and says which
    assert "no response" in by["stallheaders"][0]["error"]
    assert "headers but no token" in by["stalltoken"][0]["error"]
    assert "stalled after 1 token" in by["stallstream"][0]["error"]
    for r in by["stallstream"]:
        assert 1.5 < r["end_s"] - r["sent_s"] < 30
    assert all(r["status"] == 429 and r["retries"] == 0 for r in by["http429"])
    verdict = report["summary"]["verdict"]
    assert verdict.startswith("FAILED REQUESTS: ")
    assert "truncate: 6 of 6 requests failed (truncated x6" in verdict
    assert "http429: 6 of 6 requests failed (http x6: HTTP 429" in verdict
    assert "CPU" not in verdict  # the client machine does not make an external server a CPU
    assert figures_in(tmp_path) == sorted(FIGURES)


@pytest.mark.slow
def test_two_third_party_endpoints_give_an_ab_with_intervals_and_a_verdict(
    peer: str, tmp_path: Path
) -> None:
    args = ["--endpoint", f"a={peer}/ok", "--endpoint", f"b={peer}", *SMALL, "--max-tokens", "2"]
    rc, text, report = serve_ab(tmp_path, *args, "--repeats", "2")
    assert rc == 0, text
    assert report["summary"]["arms"] == ["a", "b"] == report["config"]["arms"]
    assert report["summary"]["failed_requests"] == 0
    # report.verdicts: "b median TTFT -13% vs a, faster (95% CI ...)" when resolved, "no
    # difference resolved ... vs a (range ...)" when not; which one is chance (one server)
    verdict = report["summary"]["verdict"]
    assert verdict.startswith("rate inf: ") and "median TTFT" in verdict
    assert re.search(r" vs a\b", verdict), verdict
    med = report["ab"]["inf"]["b"]["median_ttft"]
    assert med["a_units"] >= 3 and med["b_units"] >= 3  # each request is a unit
    assert med["a_label"] == "a" and med["b_label"] == "b"
    assert all(math.isfinite(med["interval"][k]) for k in ("low", "high"))
    assert med["verdict"] in (SIGNIFICANT, STRADDLES_ZERO) and "p_value" in med["test"]
    assert not any("eager" in n or "STAND-IN" in n for n in report["notes"])
    assert figures_in(tmp_path) == sorted(FIGURES)
    assert "vs a" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_one_endpoint_given_as_a_v1_url_is_a_plain_benchmark(peer: str, tmp_path: Path) -> None:
    rc, text, report = serve_ab(tmp_path, "--endpoint", f"solo={peer}/v1", *SMALL)
    assert rc == 0, text
    assert report["summary"]["arms"] == ["solo"] and report["ab"] == {}
    assert report["summary"]["verdict"].startswith("one arm (no A/B): inf: solo median TTFT")
    assert report["config"]["arm_sources"]["solo"]["url"] == peer  # /v1 dropped
    assert figures_in(tmp_path) == sorted(FIGURES)


@pytest.mark.slow
def test_retry_429_honours_retry_after_and_then_succeeds(peer: str, tmp_path: Path) -> None:
    # one request at a time: every request's first answer is a 429, the retry is served
    args = ["--endpoint", f"limited={peer}/every2nd429", *SMALL, "--max-concurrency", "1"]
    rc, text, report = serve_ab(tmp_path, *args, "--retry-429", "2")
    assert rc == 0, text
    reqs = report["requests"]
    assert len(reqs) == 6 and all(r["retries"] == 1 and not r["error"] for r in reqs)
    assert all(r["ttft_ms"] >= 900 for r in reqs)  # Retry-After: 1 s waited, inside TTFT


@pytest.mark.slow
def test_an_unreachable_endpoint_is_a_dead_arm_next_to_a_measured_one(
    peer: str, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    args = ["--endpoint", f"up={peer}", "--endpoint", f"down={dead}", "--num-prompts", "6"]
    rc, text, report = serve_ab(
        tmp_path, *args, "--warmup-requests", "1", "--request-rate", "inf,4"
    )
    assert rc == 1, text
    rows = {(r["rate"], r["arm"]): r for r in report["results"]}
    assert rows[("inf", "up")]["completed"] == rows[("4", "up")]["completed"] == 6
    assert rows[("inf", "down")]["completed"] == 0 and rows[("inf", "down")]["failed"] == 6
    assert "down: endpoint" in report["summary"]["error"] and "looks dead" in text
    assert report["summary"]["failures"]["down"]["failed"] == 6
    assert figures_in(tmp_path) == sorted(FIGURES)


@pytest.mark.slow  # the command imports torch before it checks its options (~10 s)
@pytest.mark.parametrize(
    "endpoint",
    [
        "a=http://127.0.0.1:1/v1/chat/completions",
        "a=ftp://host",
        "a=http://h:1,a=http://h:2",
    ],
)
def test_a_bad_endpoint_is_a_usage_error(endpoint: str, tmp_path: Path) -> None:
    args = [x for e in endpoint.split(",") for x in ("--endpoint", e)]
    rc, text, _ = serve_ab(tmp_path, *args, timeout=120)
    assert rc == 2, text
    assert "--endpoint" in text
