"""The emulated pipeline behind the OpenAI-compatible server: streamed first tokens with the
pipeline's stage times and copy-ledger bytes, a bad image, a stalled and a crashed
pipeline, and ``kimi-bench serve`` as a process (Ctrl-C, a pipeline that dies, usage
errors). Every test checks that its own processes and shared-memory segments are gone."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.options import ServeOptions
from kimi_bench.pipeline.transport import list_segments
from kimi_bench.serving.client import ClientOptions, drive, probe_server
from kimi_bench.serving.emulator import STAGES, EmulatorBackend
from kimi_bench.serving.launch import ServerProcess, free_port
from kimi_bench.serving.ledger_metrics import copies_from_metrics
from kimi_bench.serving.metrics import metrics_delta, scrape_metrics, series_name
from kimi_bench.serving.server import create_app
from kimi_bench.serving.server_metrics import ServerMetrics
from kimi_bench.serving.trace import make_trace
from kimi_bench.serving.usage import count_text_tokens
from tests.backends import serve_in_thread
from tests.faults import DieAtRequest, HangAtRequest, importable_env, spec
from tests.serve_helpers import MARK, adopting_orphans, marked_processes, mp_helpers
from tests.server_options import emulator_config, server_options

MODEL = "emulator-test"
W, H = 160, 120


def jpeg(seed: int = 0, size: tuple[int, int] = (W, H)) -> bytes:
    buf = io.BytesIO()
    Image.effect_noise(size, 40 + seed).convert("RGB").save(buf, "JPEG", quality=85)
    return buf.getvalue()


@contextlib.contextmanager
def emulator(arm: str = "deferred", **conf: Any) -> Iterator[tuple[str, EmulatorBackend, list]]:
    """The backend behind the server on a loopback port (in this process); yields the URL,
    the backend and the messages its ``on_dead`` got. Afterwards: no segment is left."""
    metrics = ServerMetrics()
    dead: list[str] = []
    settings = {"ranks": 2, "workers": 2, "device": "cpu", **conf}
    settings["processor_workers"] = settings.pop("workers")
    backend = EmulatorBackend(emulator_config(arm, **settings), metrics, dead.append)
    appl = create_app(backend, server_options(MODEL), metrics)
    with serve_in_thread(appl, start_timeout_s=300) as url:
        yield url, backend, dead
    assert list_segments(backend.prefix) == []


def client(**kw: Any) -> ClientOptions:
    base = ClientOptions.from_options(ServeOptions(), MODEL)
    return dataclasses.replace(
        base, **{"api_key_env": "KIMI_BENCH_TEST_NO_KEY", "warmup_requests": 0, **kw}
    )


def copied(rows: list[dict[str, Any]]) -> int:
    return sum(r["bytes"] for r in rows if r["copies"])


@pytest.mark.slow
def test_both_arms_stream_first_tokens_with_stage_times_and_ledger_bytes() -> None:
    trace = make_trace([0.0, 0.05, 0.1], [jpeg(0), jpeg(1)])
    seen: dict[str, Any] = {}
    for arm in ("eager", "deferred"):
        with emulator(arm) as (url, _backend, dead):
            before = scrape_metrics(url)
            res = drive(url, trace, client())
            after = scrape_metrics(url)
        assert res.completed == 3 and not dead, [r.error for r in res.records]
        for rec in res.records:
            assert rec.status == 200 and rec.ttft_ms is not None and rec.ttft_ms > 0
            assert rec.server is not None and rec.server["arm"] == arm
            assert set(rec.server["stages_s"]) == set(STAGES)
            assert all(v >= 0 for v in rec.server["stages_s"].values())
            assert rec.server["image_tokens"] > 0 and rec.server["batch_requests"] >= 1
            # usage: the emulated processor's image tokens + the request's text tokens
            text = count_text_tokens([trace.prompt])
            assert text > 0 and rec.prompt_tokens == rec.server["image_tokens"] + text
        delta = metrics_delta(before, after)
        for stage in STAGES:
            hist = delta.histograms[series_name("kimi_bench_stage_seconds", (("stage", stage),))]
            assert hist.count == 3
        steps = delta.histograms["kimi_bench_batch_requests"]
        assert steps.sum == 3 and 1 <= steps.count <= 3  # requests per scheduler step
        seen[arm] = (copies_from_metrics(before, after), delta)
    eager, deferred = seen["eager"][0], seen["deferred"][0]
    # what the arms are: eager copies FP32 patches to the host, deferred carries raw uint8
    # to the owner only (one 160x120 RGB image per request)
    assert any(r["stage"] == "d2h" for r in eager)
    assert not any(r["stage"] == "d2h" for r in deferred)
    owner = [r for r in deferred if r["stage"] == "owner_h2d"]
    assert sum(r["bytes"] for r in owner) == 3 * W * H * 3
    assert copied(deferred) < copied(eager)
    stage_bytes = seen["deferred"][1].counters
    assert stage_bytes['kimi_bench_stage_bytes_total{stage="owner_h2d"}'] == 3 * W * H * 3


def _post(url: str, images: list[bytes]) -> httpx.Response:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "what is this"}]
    for b in images:
        ref = "data:image/jpeg;base64," + base64.b64encode(b).decode()
        parts.append({"type": "image_url", "image_url": {"url": ref}})
    body = {"model": MODEL, "messages": [{"role": "user", "content": parts}], "max_tokens": 1}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=120, trust_env=False)


@pytest.mark.slow
def test_an_image_that_does_not_decode_fails_alone_with_400_from_the_producer() -> None:
    # a valid header (the server's size check passes), half the data: the producer fails it
    truncated = jpeg(8, (320, 240))
    truncated = truncated[: len(truncated) // 2]
    with emulator("deferred", ranks=2, workers=1, transport="pickle") as (url, _backend, dead):
        bad = _post(url, [truncated])
        not_an_image = _post(url, [b"\xff\xd8 this is not a JPEG"])  # refused by the server
        good = _post(url, [jpeg(2)])
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith(
        "the producer rejected the request: OSError: image file is truncated"
    )
    assert not_an_image.status_code == 400
    assert "is not an image file PIL can read" in not_an_image.json()["error"]["message"]
    assert good.status_code == 200 and good.json()["choices"][0]["message"]["content"]
    assert not dead


@pytest.mark.slow
def test_a_wedged_producer_times_out_its_request_and_the_others_complete() -> None:
    # request ids count from 0, the start-up request: rid 2 wedges the second one sent
    trace = make_trace([0.0, 0.3, 0.6, 0.9], [jpeg(3)])
    with emulator("deferred", ranks=1, workers=2, fault_hooks=spec(HangAtRequest, rid=2)) as (
        url,
        _b,
        dead,
    ):
        res = drive(url, trace, client(request_timeout_s=8))
    kinds = [r.error_kind for r in res.records]
    assert kinds == [None, "timeout", None, None], [r.error for r in res.records]
    assert "no complete response within 8 s" in (res.records[1].error or "")
    assert res.error is None and not dead


@pytest.mark.slow
def test_a_crashed_pipeline_fails_its_requests_with_503_naming_the_cause() -> None:
    trace = make_trace([0.0, 0.5, 1.0], [jpeg(4)])
    with emulator("eager", ranks=2, workers=1, fault_hooks=spec(DieAtRequest, rid=2)) as (
        url,
        backend,
        dead,
    ):
        res = drive(url, trace, client(request_timeout_s=60))
        later = _post(url, [jpeg(5)])
    assert [r.ok for r in res.records] == [True, False, False]
    for rec in res.records[1:]:
        assert rec.error_kind == "http" and rec.status == 503
        assert "worker producer0 died with exit code 3" in (rec.error or "")
    assert later.status_code == 503 and "producer0 died" in later.text
    assert dead == [backend.dead] and "producer0 died with exit code 3" in dead[0]


# ------------------------------------------------------------ kimi-bench serve, a process


def _serve(tmp_path: Path, mark: str, *extra: str) -> tuple[ServerProcess, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "kimi_bench.cli.main", "serve", "--port", str(port)]
    argv += ["--ranks", "2", "--processor-workers", "1", "--device", "cpu", "--model", MODEL]
    env = importable_env({**os.environ, MARK: mark})  # --fault-hooks names tests.faults
    log = tmp_path / "serve.log"
    return ServerProcess([*argv, *extra], url, log, start_timeout_s=300, env=env), url


@pytest.mark.slow
def test_kimi_bench_serve_serves_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    server, url = _serve(tmp_path, mark, "--arm", "deferred", "--transport", "shm")
    with adopting_orphans() as orphans, server:
        assert server.proc is not None
        pid = server.proc.pid
        info = probe_server(url)
        res = drive(url, make_trace([0.0, 0.1], [jpeg(6)]), client())
        text = httpx.get(url + "/metrics", trust_env=False).text
        # the server and its pipeline run: multiprocessing's helpers, 2 ranks, 1 producer
        assert len(marked_processes(mark)) == 1 + mp_helpers() + 3
        server.proc.send_signal(signal.SIGINT)  # Ctrl-C
        code = server.proc.wait(60)
        # every process under the server was reaped by its parent before the server
        # exited: none was re-parented (to this test, the subreaper), not even briefly
        assert orphans() == []
    log = server.log.read_text()
    assert code == 0, log
    assert info.model == MODEL and info.version_source == "GET /version"
    assert res.completed == 2
    assert 'kimi_bench_pipeline_copy_bytes_total{dst="shm"' in text
    assert "kimi-bench serve: stopped on SIGINT (Ctrl-C); 2 request(s): 2 ok" in log
    assert "Traceback" not in log
    assert marked_processes(mark) == []
    assert list_segments(f"kimibench_{pid}_") == []


@pytest.mark.slow
def test_kimi_bench_serve_stops_by_itself_when_its_pipeline_dies(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    fault = spec(DieAtRequest, rid=1)
    server, url = _serve(tmp_path, mark, "--arm", "eager", "--fault-hooks", fault)
    with adopting_orphans() as orphans, server:
        assert server.proc is not None
        pid = server.proc.pid
        res = drive(url, make_trace([0.0], [jpeg(7)]), client())
        code = server.proc.wait(60)
        assert orphans() == []  # every process under the server reaped before it exited
    log = server.log.read_text()
    assert res.records[0].status == 503 and "producer0 died" in (res.records[0].error or "")
    assert code == 1, log
    assert "error: the emulated pipeline of arm eager failed: worker producer0 died" in " ".join(
        log.split()
    )
    assert "Traceback" not in log
    assert marked_processes(mark) == []
    assert list_segments(f"kimibench_{pid}_") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--arm", "lazy"],
            "--arm: Input should be 'eager', 'deferred', 'zero-copy', 'deferred-decode' or "
            "'vllm-uint8'",
        ),
        (["--arm", "eager", "--transport", "tcp"], "--transport/--carrier: Input should be"),
        (["--arm", "eager", "--standin", "gflops=3"], "--standin: takes KEY=VALUE"),
        (
            ["--arm", "eager", "--standin", "cpu_flops_scale=x"],
            "cpu-flops-scale: Input should be a valid number",
        ),
        (
            ["--arm", "eager", "--standin", "cpu_flops_scale=nan"],
            "cpu-flops-scale: Input should be less than or equal to 1",
        ),
        (["--arm", "eager", "--preset", "kimi-k9"], "--preset: Input should be 'kimi-k3'"),
    ],
)
def test_kimi_bench_serve_usage_errors_exit_2(args: list[str], message: str) -> None:
    res = CliRunner().invoke(app, ["serve", *args, "--device", "cpu"])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    from kimi_bench.serving.launch import bind_socket

    with contextlib.closing(bind_socket("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "kimi_bench.cli.main", "serve", "--arm", "eager"]
        argv += ["--port", str(port), "--ranks", "1", "--processor-workers", "1"]
        argv += ["--device", "cpu"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    out = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, out  # a usage error (README), before anything starts
    assert f"cannot listen on 127.0.0.1:{port}" in out and "Traceback" not in out
    assert "kimi-bench serve: arm" not in out  # no line saying where it serves
