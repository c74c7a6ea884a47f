"""Issue 32 through the installed command: ``kimi-bench serve`` with its defaults (no
--arm) and --profile, ``kimi-bench serve-ab --endpoint`` against it with --max-tokens,
--goodput, --metric-percentiles and --profile-server, then ``kimi-bench gate`` with the
serving rules; and the serving figures of a recorded stream with known timings against
the formulas sglang.bench_serving and vllm bench serve use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kimi_bench.results.serve import ArmCell
from kimi_bench.results.serve_rows import ServeRequest, serve_requests
from kimi_bench.serving.launch import free_port
from tests.serve_helpers import healthy_or_fail

ROOT = Path(__file__).resolve().parents[2]
KB = [sys.executable, "-m", "kimi_bench.cli.main"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

# a recorded stream: per request the TTFT, the gaps between its text chunks (ms), its
# output tokens and when its response ended (s from the trace start); request 3 failed
RECORDED = [
    (120.0, [30.0, 31.0, 29.0], 4, 0.30),
    (150.0, [40.0, 45.0, 50.0], 4, 0.40),
    (90.0, [], 1, 0.10),
    (None, [], 0, 0.50),
    (200.0, [20.0, 25.0, 35.0], 4, 0.55),
]


def _rows() -> list[dict]:
    rows = []
    for rid, (ttft, itl, n, end) in enumerate(RECORDED):
        row = {"rate": "inf", "arm": "a", "repeat": 0, "rid": rid, "images": 1,
               "pixels": 320 * 240, "output_tokens": n, "end_s": end, "status": 200}  # fmt: skip
        if ttft is None:
            row.update(error="HTTP 500", status=500, ttft_ms=None)
        else:
            e2e = ttft + sum(itl)
            row.update(ttft_ms=ttft, itl_ms=itl, e2e_ms=e2e)
            row["tpot_ms"] = ServeRequest.model_validate(row).own_tpot
        rows.append(row)
    return rows


def test_recorded_stream_gives_the_peers_figures() -> None:
    """vllm bench serve (benchmark_serving.calculate_metrics) and sglang.bench_serving
    compute TPOT = (latency - ttft) / (output_len - 1) for output_len > 1, ITL percentiles
    over every request's gaps flattened, np.percentile, output throughput = output tokens /
    duration, goodput = requests within every SLO / duration (TPOT 0 for one token)."""
    rows = _rows()
    ok = [r for r in RECORDED if r[0] is not None]
    duration = max(r[3] for r in RECORDED)
    latency = [t + sum(i) for t, i, _, _ in ok]
    tpots = [(lat - t) / (n - 1) for (t, _, n, _), lat in zip(ok, latency, strict=True) if n > 1]
    itls = [x for _, i, _, _ in ok for x in i]
    cell = ArmCell("inf", "a", tuple(serve_requests(rows)), {"ttft": 160.0, "tpot": 40.0})
    got = cell.rate_figures((50.0, 90.0, 99.0, 99.9))
    for q, name in ((50, "median"), (90, "p90"), (99, "p99"), (99.9, "p99_9")):
        assert got[f"itl_{name}_ms"] == pytest.approx(np.percentile(itls, q))
        assert got[f"tpot_{name}_ms"] == pytest.approx(np.percentile(tpots, q))
        assert got[f"e2e_{name}_ms"] == pytest.approx(np.percentile(latency, q))
        assert got[f"ttft_{name}_ms"] == pytest.approx(np.percentile([r[0] for r in ok], q))
    assert got["tpot_mean_ms"] == pytest.approx(np.mean(tpots))
    assert got["output_tokens_per_s"] == pytest.approx(sum(r[2] for r in ok) / duration)
    # within ttft <= 160 and tpot <= 40: requests 0 (TPOT 30) and 2 (one token); 1 has TPOT
    # 45, 4 a TTFT of 200
    good = 2
    assert got["good_requests"] == good
    assert got["goodput_req_per_s"] == pytest.approx(good / duration)
    assert got["megapixels_per_s"] == pytest.approx(4 * 320 * 240 / duration / 1e6)


def _gate(report: Path, rules: str, tmp: Path) -> subprocess.CompletedProcess:
    path = tmp / f"rules-{abs(hash(rules))}.toml"
    path.write_text(rules)
    cmd = [*KB, "gate", str(report), "--rules", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)


@pytest.mark.slow
def test_serve_ab_reports_decode_latencies_goodput_and_profiles(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    traces = tmp_path / "traces"
    serve = [*KB, "serve", "--port", str(port), "--ranks", "2", "--processor-workers", "1",
             "--device", "cpu", "--profile", str(traces), "--profile-requests", "2"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(serve, stdout=out, stderr=subprocess.STDOUT, env=ENV)
    try:
        healthy_or_fail(url, proc, log, "kimi-bench serve")
        report = tmp_path / "ab"
        cmd = [*KB, "serve-ab", "--endpoint", f"a={url}", "--request-rate", "inf",
               "--num-prompts", "4", "--warmup-requests", "1", "--image-resolution", "160x120",
               "--max-tokens", "3", "--goodput", "ttft:60000 tpot:60000",
               "--metric-percentiles", "50,99.9", "--profile-server",
               "--out", str(report)]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    finally:
        proc.terminate()
        proc.wait(60)
    data = json.loads((report / "report.json").read_text())
    rows = data["requests"]
    assert len(rows) == 4
    for r in rows:  # the emulator decodes: 3 tokens, 2 gaps, TPOT from its own times
        assert r["output_tokens"] == 3 and len(r["itl_ms"]) == 2, r
        assert r["tpot_ms"] == pytest.approx((r["e2e_ms"] - r["ttft_ms"]) / 2)
        assert r["e2e_ms"] >= r["ttft_ms"] + sum(r["itl_ms"]) - 1e-6
        assert r["images"] == 1 and r["pixels"] == 160 * 120 and r["encoded_bytes"] > 0
        assert r["prompt_image_tokens"] > 0  # the images were billed
        assert r["prompt_tokens"] > data["config"]["arm_sources"]["a"]["text_only_prompt_tokens"]
    (row,) = data["results"]
    itls = [x for r in rows for x in r["itl_ms"]]
    assert row["itl_p99_9_ms"] == pytest.approx(np.percentile(itls, 99.9))
    assert row["good_requests"] == 4 and row["goodput_req_per_s"] > 0
    assert "ttft_p90_ms" not in row and row["ttft_median_ms"] > 0  # the asked percentiles
    assert any("--profile-server" in n and "/start_profile" in n for n in data["notes"])
    assert not any("billed no image tokens" in n for n in data["notes"])
    # kimi-bench serve's traces: valid Chrome trace JSON with the pipeline's stage names
    names = set()
    for f in ("producer0", "rank0", "rank1"):
        trace = json.loads((traces / f"{f}.trace.json").read_text())
        names |= {e.get("name") for e in trace["traceEvents"]}
    assert {"stage:producer", "stage:broadcast", "stage:owner_materialize"} <= names
    # the gate: serving rules pass, fail and are refused without the data
    ok = _gate(report, "[serve_ab.inf]\nmin_goodput = 0.01\nmax_p99_itl_ms = 600000\n", tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "serve_ab.inf.a.max_p99_itl_ms" in ok.stdout
    bad = _gate(report, "[serve_ab.inf]\nmax_p99_tpot_ms = 0.000001\n", tmp_path)
    assert bad.returncode == 1 and "serve_ab.inf.a.max_p99_tpot_ms" in bad.stdout
    old = ROOT / "reports/examples/cpu-run/serve-ab"
    refused = _gate(old, "[serve_ab.inf]\nmax_p99_itl_ms = 100\n", tmp_path)
    assert refused.returncode == 2
    assert "rule [serve_ab.inf] max_p99_itl_ms: the report has no ITL data" in refused.stderr
    # an edited goodput is refused on read
    data["results"][0]["goodput_req_per_s"] *= 2
    edited = tmp_path / "edited" / "report.json"
    edited.parent.mkdir()
    edited.write_text(json.dumps(data))
    res = _gate(edited, "[serve_ab]\nmax_failed = 0\n", tmp_path)
    assert res.returncode == 2 and "results[0].goodput_req_per_s" in res.stderr
