"""GuideLLM and AIPerf against ``kimi-bench serve``, then ``kimi-bench import`` and
``gate`` on what they wrote (issue 22 item 5, optional peers). Each tool lives in its own
venv: point ``KB_GUIDELLM`` / ``KB_AIPERF`` at its executable (or put it on PATH); without
it the test is skipped with that reason."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app

pytestmark = pytest.mark.slow


def _tool(env: str, name: str) -> str:
    exe = os.environ.get(env) or shutil.which(name)
    if not exe:
        pytest.skip(f"{name} is not installed: set {env} to its executable (pip install it in "
                    "its own venv; see README 'Results from other tools')")  # fmt: skip
    return exe


def _tokenizer(folder: Path) -> Path:
    """A tiny WordLevel tokenizer folder written as JSON (the tools load it with
    transformers in their own venvs; no hub)."""
    words = ["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(500)]
    special = [{"id": i, "content": w, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, w in enumerate(words[:3])]  # fmt: skip
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None, "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)},
                  "unk_token": "<unk>"},
    }  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>",
           "bos_token": "<s>", "eos_token": "</s>"}  # fmt: skip
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
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(url + "/health", timeout=5, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail("kimi-bench serve did not become healthy in 300 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _run(cmd: list[str], cwd: Path) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=cwd)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def _import_and_gate(tmp_path: Path, result: Path, tool: str) -> dict:
    runner = CliRunner()
    res = runner.invoke(app, ["import", str(result), "--output-dir", str(tmp_path / "imp")])
    assert res.exit_code == 0, res.output
    (tmp_path / "rules.toml").write_text("[serve_ab]\nmax_failed = 0\n")
    gate = runner.invoke(app, ["gate", str(tmp_path / "imp"), "--rules",
                               str(tmp_path / "rules.toml")])  # fmt: skip
    assert gate.exit_code == 0, gate.output
    assert f"imported: {tool}" in gate.output
    return json.loads((tmp_path / "imp" / "report.json").read_text())


@pytest.fixture
def guidellm() -> str:
    return _tool("KB_GUIDELLM", "guidellm")


@pytest.fixture
def aiperf() -> str:
    return _tool("KB_AIPERF", "aiperf")


# the tool fixture comes before ``server``: a missing tool skips before a server starts
def test_guidellm_run_imports_and_gates(tmp_path: Path, guidellm: str, server: str) -> None:
    exe = guidellm
    tok = _tokenizer(tmp_path / "tok")
    out = tmp_path / "guidellm.json"
    _run([exe, "run", "--backend",
          f"kind=openai_http,target={server},model=kimi-bench-emulator",
          "--profile", "kind=synchronous", "--constraint", "kind=max_requests,count=4",
          "--data", "kind=synthetic_text,prompt_tokens=16,output_tokens=4",
          "--tokenizer", f"kind=hf_auto,model={tok}", "--output", f"kind=json,path={out}",
          "--disable-console-interactive", "--disable-progress"], tmp_path)  # fmt: skip
    rep = _import_and_gate(tmp_path, out, "guidellm")
    assert rep["results"][0]["completed"] == 4 and len(rep["requests"]) == 4


def test_aiperf_profile_imports_and_gates(tmp_path: Path, aiperf: str, server: str) -> None:
    exe = aiperf
    tok = _tokenizer(tmp_path / "tok")
    art = tmp_path / "aiperf"
    _run([exe, "profile", "--model", "kimi-bench-emulator", "--url", server,
          "--endpoint-type", "chat", "--streaming", "--tokenizer", str(tok),
          "--request-count", "4", "--concurrency", "1", "--synthetic-input-tokens-mean", "16",
          "--output-tokens-mean", "4", "--artifact-dir", str(art)], tmp_path)  # fmt: skip
    summary = _import_and_gate(tmp_path / "s", art / "profile_export_aiperf.json", "aiperf")
    assert summary["config"]["per_request"] is False and summary["results"][0]["completed"] == 4
    rows = _import_and_gate(tmp_path / "r", art / "profile_export.jsonl", "aiperf")
    assert len(rows["requests"]) == 4
