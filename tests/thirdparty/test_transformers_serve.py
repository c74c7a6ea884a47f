"""Issue 32 against a real third-party server: ``transformers serve`` (Hugging Face
transformers' OpenAI-compatible server) with a tiny random LLaVA made here without the hub
(tiny_llava.py), driven by ``kimi-bench serve-ab --endpoint`` as a user runs it. The
per-request TTFT/ITL/TPOT/E2E of the written report.json must be the times the client
recorded, read as sglang.bench_serving reads a stream, and its percentile table and
goodput what sglang.bench_serving's and vllm bench serve's formulas give from them; the
tokens the server counted (usage) must be the text chunks streamed.

The server lives in a venv of its own (scripts/transformers-serve-env.sh VENV_DIR): point
``KB_TRANSFORMERS_SERVE`` at VENV_DIR/bin/transformers (or put ``transformers`` on PATH);
without it the test is skipped with that reason.

The peers' definitions, per request (read in their sources, not copied):
- sglang ``python/sglang/bench_serving.py`` (async_request_openai_chat_completions,
  calculate_metrics): TTFT at the first chunk whose ``delta.content`` is non-empty, ITL =
  the gaps between such chunks, latency = the time the last line of the stream was read,
  output_len = ``usage.completion_tokens``; TPOT = (latency - ttft) / (output_len - 1).
- vllm ``vllm/benchmarks/serve.py`` calculate_metrics: TPOT = (latency - ttft) /
  (output_len - 1) for output_len > 1, else 0 (for goodput only); ITL percentiles over
  every request's gaps pooled; goodput = requests with every SLO >= its metric (ttft,
  tpot, e2el; ms) / the benchmark duration; percentiles are np.percentile; output
  throughput = output tokens / duration.
One difference on this server: vllm's chat client (vllm/benchmarks/lib/
endpoint_request_func.py) stamps TTFT at the first chunk with ``choices`` at all, and
transformers serve opens every stream with a role-only chunk; kimi-bench, like sglang,
waits for text (the role chunk is not a token). The figures below follow the formulas from
the recorded per-request times; no bound depends on how fast this machine is."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from kimi_bench.results.serve import ArmCell
from kimi_bench.results.serve_rows import serve_requests
from kimi_bench.serving.launch import free_port
from tests.serve_helpers import healthy_or_fail

# one server for the module's tests, on one xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("transformers_serve")]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
KB = [sys.executable, "-m", "kimi_bench.cli.main"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
MAX_TOKENS = 8
PROMPTS = 8
SLO = {"ttft": 2000.0, "tpot": 500.0, "e2el": 4000.0}
PCTS = (50.0, 90.0, 99.0, 99.9)


def _transformers() -> Path:
    exe = os.environ.get("KB_TRANSFORMERS_SERVE") or shutil.which("transformers")
    if not exe:
        pytest.skip("transformers serve is not installed: set KB_TRANSFORMERS_SERVE to "
                    "VENV_DIR/bin/transformers (build it with scripts/transformers-serve-env.sh "
                    "VENV_DIR)")  # fmt: skip
    return Path(exe)


def _server_env(tmp: Path) -> dict[str, str]:
    """No hub: offline, and a cache of its own (so /v1/models scans an empty folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    cache = tmp / "hf"
    (cache / "hub").mkdir(parents=True)
    return {**env, "HF_HUB_OFFLINE": "1", "HF_HOME": str(cache), "HF_HUB_CACHE": str(cache / "hub"),
            "TRANSFORMERS_VERBOSITY": "info"}  # fmt: skip


def _make_model(exe: Path, tmp: Path, env: dict[str, str]) -> tuple[Path, int]:
    out = tmp / "tiny-llava"
    res = subprocess.run([str(exe.parent / "python"), str(HERE / "tiny_llava.py"), str(out)],
                         capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    made = json.loads(res.stdout.strip().splitlines()[-1])
    return out, int(made["image_tokens"])


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (it was started in a session of its own), SIGKILL
    it after 30 s; then nothing of the group may be left."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    assert proc.poll() is not None, "transformers serve survived SIGKILL"
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("a process of transformers serve's group outlived it (killed now)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    exe = _transformers()  # a missing server skips before anything starts
    tmp_path = tmp_path_factory.mktemp("transformers-serve")
    env = _server_env(tmp_path)
    model, image_tokens = _make_model(exe, tmp_path, env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "transformers-serve.log"
    cmd = [str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
           "--device", "cpu", "--log-level", "info"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    try:
        healthy_or_fail(url, proc, log, "transformers serve")
        yield url, str(model), image_tokens
    finally:
        _stop(proc)


def _peer_request_figures(r: dict) -> tuple[float, float, float | None]:
    """TTFT, E2E latency (ms) and TPOT (None for one token) of one request, from the times
    the client recorded (s on its monotonic clock), as the peers define them."""
    ttft = (r["first_token_s"] - r["sent_s"]) * 1000
    e2e = (r["end_s"] - r["sent_s"]) * 1000
    n = r["output_tokens"]
    return ttft, e2e, ((e2e - ttft) / (n - 1) if n > 1 else None)


def _check_rows(rows: list[dict], text_only: int, image_tokens: int) -> None:
    for r in rows:
        assert r["error"] is None and r["status"] == 200, r
        # the server's count (usage.completion_tokens) is the chunks the client counted
        assert r["output_tokens"] == r["token_chunks"] == MAX_TOKENS, r
        assert r["finish_reason"] == "length" and len(r["itl_ms"]) == MAX_TOKENS - 1, r
        # the image reached the vision tower: billed as its placeholder tokens
        assert r["images"] == 1 and r["prompt_tokens"] == text_only + image_tokens, r
        ttft, e2e, tpot = _peer_request_figures(r)
        assert r["ttft_ms"] == pytest.approx(ttft, rel=1e-6, abs=1e-6)
        assert r["e2e_ms"] == pytest.approx(e2e, rel=1e-6, abs=1e-6)
        assert r["tpot_ms"] == pytest.approx(tpot, rel=1e-6, abs=1e-6)
        # the gaps lie between the first token and the stream's end (the final chunk,
        # finish_reason and usage, is the stream's last line: no [DONE] on this server)
        assert min(r["itl_ms"]) >= 0
        assert ttft + sum(r["itl_ms"]) <= e2e + 1e-6


def _vllm_good(figs: list[tuple[float, float, float | None]], slo: dict[str, float]) -> int:
    """vllm: a request is good when every SLO >= its metric; TPOT 0 below two tokens."""
    return sum(
        all(slo[k] >= v for k, v in (("ttft", t), ("tpot", p or 0.0), ("e2el", e)) if k in slo)
        for t, e, p in figs
    )


def _check_table(row: dict, rows: list[dict]) -> None:
    figs = [_peer_request_figures(r) for r in rows]
    series = {
        "ttft": [f[0] for f in figs],
        "e2e": [f[1] for f in figs],
        "tpot": [f[2] for f in figs if f[2] is not None],
        "itl": [x for r in rows for x in r["itl_ms"]],
    }
    for metric, xs in series.items():
        assert row[f"{metric}_mean_ms"] == pytest.approx(np.mean(xs), rel=1e-6)
        for q in PCTS:
            name = "median" if q == 50 else "p" + f"{q:g}".replace(".", "_")
            assert row[f"{metric}_{name}_ms"] == pytest.approx(np.percentile(xs, q), rel=1e-6)
    good = _vllm_good(figs, SLO)
    # the duration: trace start to the last response's end (end_s counts from the start);
    # vllm's is start to the end of its gather, the same moment less its loop's delay
    duration = max(r["end_s"] for r in rows)
    assert row["completed"] == PROMPTS and row["failed"] == 0
    assert row["good_requests"] == good
    assert row["goodput_req_per_s"] == pytest.approx(good / duration, rel=1e-6)
    assert row["output_tokens_per_s"] == pytest.approx(PROMPTS * MAX_TOKENS / duration, rel=1e-6)
    # an SLO at this run's own median splits the requests whatever the machine's speed:
    # the figures code that wrote the report counts the same good ones as vllm's rule
    for key, metric in (("ttft", "ttft"), ("tpot", "tpot"), ("e2el", "e2e")):
        tight = {key: float(np.median(series[metric]))}
        split = ArmCell("", "", tuple(serve_requests(rows)), tight).rate_figures(PCTS)
        assert 0 < split["good_requests"] < PROMPTS, (key, tight)
        assert split["good_requests"] == _vllm_good(figs, tight)
        assert split["goodput_req_per_s"] == pytest.approx(split["good_requests"] / duration)


def _raw_stream(url: str, model: str) -> list[dict]:
    """One streamed chat completion read here line by line: its parsed events."""
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (40, 90, 200)).save(buf, "JPEG")
    image = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()
    parts = [{"type": "text", "text": "Describe the image."},
             {"type": "image_url", "image_url": {"url": image}}]  # fmt: skip
    body = {"model": model, "messages": [{"role": "user", "content": parts}],
            "max_tokens": MAX_TOKENS, "stream": True, "temperature": 0}  # fmt: skip
    events = []
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120,
                      trust_env=False) as res:  # fmt: skip
        assert res.status_code == 200, res.read()
        for line in res.iter_lines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                events.append({"done": True} if data == "[DONE]" else json.loads(data))
    return events


def test_transformers_serve_streams_one_chunk_per_token(server: tuple[str, str, int]) -> None:
    """The stream shape the figures rest on: a role-only chunk first (no token: vllm's
    client stamps its TTFT there, sglang's and kimi-bench's at the first text), then one
    text chunk per token, then one chunk with finish_reason and usage (choices present, so
    vllm's client reads no usage from it and re-tokenizes the text), and no [DONE]."""
    url, model, image_tokens = server
    events = _raw_stream(url, model)
    first, *tokens, last = events
    assert first["choices"][0]["delta"] == {"role": "assistant"}
    assert [bool(e["choices"][0]["delta"].get("content")) for e in tokens] == [True] * MAX_TOKENS
    assert last["choices"][0]["finish_reason"] == "length" and not last["choices"][0]["delta"]
    usage = last["usage"]
    assert usage["completion_tokens"] == len(tokens) == MAX_TOKENS
    assert usage["prompt_tokens"] == 4 + image_tokens  # "Describe the image." <s> + image
    assert not any(e.get("done") for e in events)


def test_serve_ab_against_transformers_serve_gives_the_peers_figures(
    tmp_path: Path, server: tuple[str, str, int]
) -> None:
    url, model, image_tokens = server
    report = tmp_path / "ab"
    slo = " ".join(f"{k}:{v:g}" for k, v in SLO.items())
    cmd = [*KB, "serve-ab", "--endpoint", f"tf={url}", "--model", model,
           "--request-rate", "4", "--num-prompts", str(PROMPTS), "--warmup-requests", "1",
           "--image-resolution", "64x48", "--max-tokens", str(MAX_TOKENS), "--goodput", slo,
           "--metric-percentiles", ",".join(f"{q:g}" for q in PCTS), "--profile-server",
           "--out", str(report)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads((report / "report.json").read_text())
    source = data["config"]["arm_sources"]["tf"]
    assert source["kind"] == "external" and source["server_header"] == "uvicorn"
    rows = data["requests"]
    assert len(rows) == PROMPTS and {r["arm"] for r in rows} == {"tf"}
    _check_rows(rows, source["text_only_prompt_tokens"], image_tokens)
    (row,) = data["results"]
    _check_table(row, rows)
    assert not any("billed no image tokens" in n for n in data["notes"])
    assert any("goodput = requests that met every SLO" in n for n in data["notes"])
    _check_vllm_ttft(rows, data["notes"])
    # a real server without /start_profile: a clear warning, on stderr and in the report,
    # and the run still measured (exit 0)
    said = f"WARNING: --profile-server: {url}/start_profile answered"
    assert said in " ".join(res.stderr.split()) or said in " ".join(res.stdout.split())
    assert source["profile_server"][0]["ok"] is False


def _check_vllm_ttft(rows: list[dict], notes: list[str]) -> None:
    """vllm bench serve's TTFT ends at the role-only chunk: the rows keep that time, and
    the report names both medians when they differ by a millisecond or more."""
    vllm = [(r["first_chunk_s"] - r["sent_s"]) * 1000 for r in rows]
    assert all(v <= r["ttft_ms"] for v, r in zip(vllm, rows, strict=True))
    ours, theirs = float(np.median([r["ttft_ms"] for r in rows])), float(np.median(vllm))
    print(f"median TTFT {ours:.1f} ms to the first text, vllm's {theirs:.1f} ms")
    lead = ours - theirs
    said = [n for n in notes if "opened with a chunk that carried no text" in n]
    if lead >= 1.0:
        (note,) = said
        assert f"stops TTFT at that chunk (median {theirs:.1f} ms here)" in note
        assert f"first text (median {ours:.1f} ms)" in note
    else:  # the tiny model answered within a millisecond of its role chunk
        assert said == []
