"""GuideLLM and AIPerf against ``kimi-bench serve``, then ``kimi-bench import`` and
``gate`` on what they wrote (issue 22 item 5, optional peers), and the token counts each
tool reports per request against what the server billed (issue 32): every request's body
is sent again to the same server and its ``usage`` read back, the tool's counts must equal
it, their sums the server's ``/metrics`` token counters, and the tool must print no
token-count discrepancy warning. Each tool lives in its own venv: point ``KB_GUIDELLM`` /
``KB_AIPERF`` at its executable (or put it on PATH); without it the test is skipped with
that reason. The image runs need ``guidellm[vision]`` (GuideLLM) and AIPerf's
``--use-server-token-count`` (AIPerf counts only the text itself, so without it every
image request differs from what any server that bills image tokens reports)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.serving.metrics import parse_metrics, series_name
from tests.serve_helpers import healthy_or_fail

pytestmark = pytest.mark.slow

# AIPerf 0.13.0's panel (aiperf/exporters/console_usage_discrepancy_exporter.py) when a
# request's usage differs from its client count by more than 10 %; GuideLLM 0.8.1 has no
# such check (it takes usage as the counts), "discrepanc" catches a wording of either
WARNINGS = ("Token Count Discrepancy Warning", "discrepanc")
IMAGE = {"width": 64, "height": 64}  # each tool's synthetic image: 9 image tokens here
# every word a letter run and every mark a punctuation run: each token of the test
# tokenizer is then one piece of GPT-2's pre-tokenizer, the server's text count
WORDS = (
    "the of and to a in is it you that he was for on are with as his they be at one "
    "have this from or had by not but what some we can out other were all there when up "
    "your how said an each she which do their time if will way about many then them "
    "would like so these her long make thing see him two has look more day could go "
    "come did no most people my over know water than call first who may down side been "
    "now find any new work part take get place made live where after back little only "
    "i me thou thee thy lord king good love sir shall"
)


def _tool(env: str, name: str) -> str:
    exe = os.environ.get(env) or shutil.which(name)
    if not exe:
        pytest.skip(f"{name} is not installed: set {env} to its executable (pip install it in "
                    "its own venv; see README 'Results from other tools')")  # fmt: skip
    return exe


def _needs_vision(exe: str) -> None:
    """GuideLLM's interpreter (its venv's python, beside the executable) must have its
    vision extra (PIL, imageio): without it GuideLLM skips every image row with an error
    line and never sends a request. Skipped without it, unless KB_GUIDELLM named the tool
    (then a broken install fails, as in CI)."""
    python = Path(exe).parent / "python"
    probe = subprocess.run([str(python), "-c", "import PIL.Image, imageio.v3"],
                           capture_output=True, text=True)  # fmt: skip
    if probe.returncode == 0:
        return
    why = ("GuideLLM's image run needs its vision extra: pip install "
           "'guidellm[vision]==0.8.1' in its venv")  # fmt: skip
    if os.environ.get("KB_GUIDELLM"):
        pytest.fail(f"{why} ({python}: {probe.stderr.strip()[-300:]})")
    pytest.skip(why)


def _tokenizer(folder: Path) -> Path:
    """A tiny WordLevel tokenizer folder written as JSON (the tools load it with
    transformers in their own venvs; no hub). Lower-cased words and punctuation runs, an
    unknown word is the plain word ``unk`` (not a special token, which the tools' decode
    would drop): the text a tool decodes from N tokens is N pieces to the server's rule,
    and N tokens again to the tool, so a tool's own count can equal the billed one."""
    words = ["<s>", "</s>", "unk", *dict.fromkeys(WORDS.split()), *".,;:!?'-\"()"]
    special = [{"id": i, "content": w, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, w in enumerate(words[:2])]  # fmt: skip
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None, "decoder": {"type": "WordPiece", "prefix": "##",
                                            "cleanup": False},
        "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)},
                  "unk_token": "unk"},
    }  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return folder


@pytest.fixture
def server(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "serve.log").open("w")
    cmd = [sys.executable, "-m", "kimi_bench.cli.main", "serve", "--arm", "deferred",
           "--port", str(port), "--ranks", "1", "--processor-workers", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        healthy_or_fail(url, proc, tmp_path / "serve.log", "kimi-bench serve")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _run(cmd: list[str], cwd: Path) -> str:
    """The tool's stdout and stderr together (also kept as ``tool.out``)."""
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=cwd)
    (cwd / "tool.out").write_text(res.stdout + res.stderr)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


def _no_warning(*texts: str) -> None:
    for text in texts:
        for w in WARNINGS:
            assert w.lower() not in text.lower(), text[-4000:]


def _server_tokens(url: str) -> dict[str, float]:
    """The server's ok requests and its prompt/generation token counters (``/metrics``)."""
    text = httpx.get(url + "/metrics", timeout=10, trust_env=False).text
    want = {'kimi_bench_requests_total{outcome="ok"}': "ok",
            "kimi_bench_prompt_tokens_total": "prompt",
            "kimi_bench_generation_tokens_total": "completion"}  # fmt: skip
    values = {series_name(n, labels): v for (n, labels), v in parse_metrics(text).values.items()}
    got = {name: values[key] for key, name in want.items() if key in values}
    assert set(got) == set(want.values()), text
    return got


def _billed(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """``usage`` of the same body sent again (streamed with include_usage, as the tools
    send it): what the server bills for that request."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    usage = None
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60,
                      trust_env=False) as res:  # fmt: skip
        assert res.status_code == 200, res.read()
        for line in res.iter_lines():
            if line.startswith("data: {") and json.loads(line[6:]).get("usage"):
                usage = json.loads(line[6:])["usage"]
    assert usage is not None
    return usage


def _check_sums(url: str, counts: list[tuple[int, int]]) -> None:
    """The server's counters (read before any body is sent again) against the tool's
    per-request (prompt, completion) counts: the tool sent only these requests."""
    tokens = _server_tokens(url)
    assert tokens == {"ok": len(counts), "prompt": sum(p for p, _ in counts),
                      "completion": sum(c for _, c in counts)}, (tokens, counts)  # fmt: skip


def _import_and_gate(tmp_path: Path, result: Path, tool: str, *, summary: bool = False) -> dict:
    """Import, then gate with ``max_failed = 0``: it passes on per-request rows; a
    summary-only file fails it by name (no rows to count failures from), as designed."""
    runner = CliRunner()
    res = runner.invoke(app, ["import", str(result), "--output-dir", str(tmp_path / "imp")])
    assert res.exit_code == 0, res.output
    (tmp_path / "rules.toml").write_text("[serve_ab]\nmax_failed = 0\n")
    gate = runner.invoke(app, ["gate", str(tmp_path / "imp"), "--rules",
                               str(tmp_path / "rules.toml")])  # fmt: skip
    assert gate.exit_code == (1 if summary else 0), gate.output
    assert f"imported: {tool}" in gate.output
    if summary:
        assert "summary only" in gate.output and "gate FAIL: 1 of 2 rules" in gate.output
    return json.loads((tmp_path / "imp" / "report.json").read_text())


@pytest.fixture
def guidellm() -> str:
    return _tool("KB_GUIDELLM", "guidellm")


@pytest.fixture
def aiperf() -> str:
    return _tool("KB_AIPERF", "aiperf")


# the tool fixture comes before ``server``: a missing tool skips before a server starts
@pytest.mark.parametrize("image", [False, True], ids=["text", "image"])
def test_guidellm_run_imports_gates_and_reports_billed_tokens(
    tmp_path: Path, guidellm: str, server: str, image: bool
) -> None:
    tok = _tokenizer(tmp_path / "tok")
    out = tmp_path / "guidellm.json"
    data = ["--data", "kind=synthetic_text,prompt_tokens=16,output_tokens=4"]
    if image:  # a second source: each row is the text and one image
        _needs_vision(guidellm)
        data += ["--data", "kind=synthetic_image,width={width},height={height}".format(**IMAGE)]
    console = _run([guidellm, "run", "--backend",
                    f"kind=openai_http,target={server},model=kimi-bench-emulator",
                    "--profile", "kind=synchronous", "--constraint", "kind=max_requests,count=4",
                    *data, "--tokenizer", f"kind=hf_auto,model={tok}",
                    "--output", f"kind=json,path={out}", "--disable-console-interactive",
                    "--disable-progress"], tmp_path)  # fmt: skip
    _no_warning(console)
    rep = _import_and_gate(tmp_path, out, "guidellm")
    assert rep["results"][0]["completed"] == 4 and len(rep["requests"]) == 4
    done = json.loads(out.read_text())["benchmarks"][0]["requests"]["successful"]
    assert len(done) == 4
    _check_sums(server, [(r["prompt_tokens"], r["output_tokens"]) for r in done])
    for r in done:
        body = json.loads(r["request_args"])["body"]
        assert any(p.get("type") == "image_url" for p in body["messages"][0]["content"]) is image
        usage = _billed(server, body)
        assert (r["prompt_tokens"], r["output_tokens"]) == (
            usage["prompt_tokens"], usage["completion_tokens"]), (r, usage)  # fmt: skip
        detail = usage["prompt_tokens_details"]
        assert r["input_metrics"]["image_tokens"] == detail["image_tokens"]
        assert r["input_metrics"]["text_tokens"] == detail["text_tokens"] == 16
        assert (detail["image_tokens"] > 0) is image


@pytest.mark.parametrize("image", [False, True], ids=["text", "image"])
def test_aiperf_profile_imports_gates_and_reports_billed_tokens(
    tmp_path: Path, aiperf: str, server: str, image: bool
) -> None:
    tok = _tokenizer(tmp_path / "tok")
    art = tmp_path / "aiperf"
    size = ["--image-width-mean", str(IMAGE["width"]), "--image-height-mean", str(IMAGE["height"])]
    extra = [*size, "--image-batch-size", "1", "--use-server-token-count"]
    console = _run([aiperf, "profile", "--model", "kimi-bench-emulator", "--url", server,
                    "--endpoint-type", "chat", "--streaming", "--tokenizer", str(tok),
                    "--request-count", "4", "--concurrency", "1",
                    "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", "4",
                    "--artifact-dir", str(art), *(extra if image else [])], tmp_path)  # fmt: skip
    logs = [p.read_text() for p in [art / "profile_export_console.txt", *art.glob("logs/*")]]
    _no_warning(console, *logs)
    export = json.loads((art / "profile_export_aiperf.json").read_text())
    if not image:  # with --use-server-token-count AIPerf does not compare
        assert export["usage_discrepancy_count"]["avg"] == 0, export["usage_discrepancy_count"]
    summary = _import_and_gate(tmp_path / "s", art / "profile_export_aiperf.json", "aiperf",
                               summary=True)  # fmt: skip
    assert summary["config"]["per_request"] is False and summary["results"][0]["completed"] == 4
    rows = _import_and_gate(tmp_path / "r", art / "profile_export.jsonl", "aiperf")
    assert len(rows["requests"]) == 4
    _check_aiperf_records(server, art, image)


def _check_aiperf_records(url: str, art: Path, image: bool) -> None:
    """Each record's counts (``profile_export.jsonl``) against the billed usage of its
    payload (``inputs.json``, by conversation id): AIPerf's ISL/OSL (its own tokenizer's
    count of the text, or the server's with --use-server-token-count) and its
    ``usage_*`` metrics (what the server said)."""
    payloads = {d["session_id"]: d["payloads"][0]
                for d in json.loads((art / "inputs.json").read_text())["data"]}  # fmt: skip
    recs = [json.loads(line) for line in (art / "profile_export.jsonl").read_text().splitlines()]
    assert len(recs) == 4
    m = [{k: v["value"] for k, v in r["metrics"].items()} for r in recs]
    _check_sums(url, [(x["usage_prompt_tokens"], x["usage_completion_tokens"]) for x in m])
    for rec, x in zip(recs, m, strict=True):
        payload = payloads[rec["metadata"]["conversation_id"]]
        usage = _billed(url, payload)
        billed = (usage["prompt_tokens"], usage["completion_tokens"])
        assert (x["usage_prompt_tokens"], x["usage_completion_tokens"]) == billed, (x, usage)
        assert (x["input_sequence_length"], x["output_sequence_length"]) == billed, (x, usage)
        assert (usage["prompt_tokens_details"]["image_tokens"] > 0) is image
        assert x.get("num_images", 0) == int(image)
        if not image:
            assert x["usage_prompt_tokens_diff_pct"] == x["usage_completion_tokens_diff_pct"] == 0
