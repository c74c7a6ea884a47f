"""Issue 43 against ``transformers serve``: ``kimi-bench serve-ab --ignore-eos`` makes every
request return exactly ``--max-tokens`` tokens, as its usage says; without it the report
counts the requests that stopped early. The tiny LLaVA here ends a sequence at any word but
``t0`` (tiny_llava.py --stops), so a greedy answer stops after one token unless told not to
(transformers serve takes that as ``generation_config``'s ``min_new_tokens``: serving.eos).
Needs the server's venv (scripts/transformers-serve-env.sh VENV_DIR and
KB_TRANSFORMERS_SERVE=VENV_DIR/bin/transformers); skipped without it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kimi_bench.serving.launch import free_port
from tests.serve_helpers import healthy_or_fail
from tests.thirdparty.test_transformers_serve import (
    ENV,
    HERE,
    KB,
    _server_env,
    _stop,
    _transformers,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("transformers_serve")]
MAX_TOKENS = 6
PROMPTS = 5


@pytest.fixture(scope="module")
def stopping_server(tmp_path_factory: pytest.TempPathFactory):
    exe = _transformers()
    tmp = tmp_path_factory.mktemp("transformers-eos")
    env = _server_env(tmp)
    model = tmp / "tiny-llava-stops"
    make = [str(exe.parent / "python"), str(HERE / "tiny_llava.py"), str(model), "--stops"]
    res = subprocess.run(make, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp / "server.log"
    cmd = [str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
           "--device", "cpu"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    try:
        healthy_or_fail(url, proc, log, "transformers serve")
        yield url, str(model)
    finally:
        _stop(proc)


def _run(tmp: Path, url: str, model: str, *extra: str) -> dict:
    out = tmp / ("eos" if extra else "plain")
    cmd = [*KB, "serve-ab", "--endpoint", f"tf={url}", "--model", model, "--request-rate",
           "inf", "--num-prompts", str(PROMPTS), "--warmup-requests", "0",
           "--image-sizes", "64x48:1,96x64:1", "--max-tokens", str(MAX_TOKENS),
           "--out", str(out), *extra]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report: dict = json.loads((out / "report.json").read_text())
    return report


def test_ignore_eos_gives_every_request_max_tokens_and_without_it_early_stops_are_counted(
    tmp_path: Path, stopping_server: tuple[str, str]
) -> None:
    url, model = stopping_server
    held = _run(tmp_path, url, model, "--ignore-eos")
    assert (
        held["config"]["arm_sources"]["tf"]["ignore_eos_as"] == "generation_config.min_new_tokens"
    )
    rows = held["requests"]
    assert len(rows) == PROMPTS and all(r["error"] is None for r in rows)
    assert [r["output_tokens"] for r in rows] == [MAX_TOKENS] * PROMPTS  # usage's count
    # usage came (its prompt count), and its completion count is the text chunks streamed
    assert all(r["prompt_tokens"] and r["token_chunks"] == MAX_TOKENS for r in rows), rows
    assert [r["finish_reason"] for r in rows] == ["length"] * PROMPTS
    (row,) = held["results"]
    assert row["stopped_early"] == 0
    plain = _run(tmp_path, url, model)
    rows = plain["requests"]
    early = sum(1 for r in rows if r["output_tokens"] < MAX_TOKENS)
    assert early >= 1, [r["output_tokens"] for r in rows]  # the model's end token came first
    (row,) = plain["results"]
    assert row["stopped_early"] == early
    said = [n for n in plain["notes"] if "stopped early" in n]
    assert said and f"{early} of {PROMPTS} completed requests stopped early" in said[0]
