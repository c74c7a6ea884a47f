"""The OpenAI-compatible server over a pluggable backend: routes, the SSE chunk format,
request validation, metrics, faults, and clean start/stop in a child process."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from PIL import Image

from kimi_bench.serving.backend import BackendError, FirstToken
from kimi_bench.serving.launch import (
    ServerProcess,
    ServerStartError,
    bind_socket,
    free_port,
)
from kimi_bench.serving.metrics import parse_metrics, series_name
from kimi_bench.serving.server import create_app
from tests.backends import FaultyBackend, SleepBackend, serve_in_thread
from tests.serve_helpers import png_bomb, requests_by_outcome
from tests.server_options import server_options

MODEL = "test-model"
CHAT = "/v1/chat/completions"


def encoded(fmt: str = "JPEG", size: tuple[int, int] = (32, 24)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 40, 10)).save(buf, fmt)
    return buf.getvalue()


def body(images: list[bytes], max_tokens: int = 1, **extra: Any) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "describe these two pictures"}]
    for b in images:
        url = "data:image/jpeg;base64," + base64.b64encode(b).decode()
        parts.append({"type": "image_url", "image_url": {"url": url}})
    msg = {"role": "user", "content": parts}
    return {"model": MODEL, "messages": [msg], "max_tokens": max_tokens, **extra}


class Recorder:
    """A backend that keeps what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[bytes], int]] = []
        self.started = self.closed = False

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int = 1
    ) -> FirstToken:
        self.calls.append((request_id, images, prompt_tokens))
        return FirstToken(stages_s={"work": 0.001}, stage_bytes={"work": 7})


@contextlib.contextmanager
def live(backend: Any, **opts: Any) -> Iterator[httpx.Client]:
    """The app with ``backend`` served on a free loopback port, and a client for it."""
    app = create_app(backend, server_options(MODEL, **opts))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30, trust_env=False) as c:
        yield c


def sse_events(client: httpx.Client, payload: dict[str, Any]) -> list[str]:
    with connect_sse(client, "POST", CHAT, json=payload) as src:
        assert src.response.status_code == 200
        return [e.data for e in src.iter_sse()]


def test_health_models_version_and_lifespan() -> None:
    backend = Recorder()
    with live(backend, version="9.9") as c:
        assert backend.started and not backend.closed
        assert c.get("/health").json() == {"status": "ok"}
        models = c.get("/v1/models").json()
        assert [m["id"] for m in models["data"]] == [MODEL]
        assert c.get("/version").json() == {"version": "9.9"}
    assert backend.closed


def test_health_is_503_until_the_backend_started() -> None:
    async def ask() -> httpx.Response:
        # ASGITransport does not run the lifespan: the backend was never started
        transport = httpx.ASGITransport(app=create_app(Recorder(), server_options(MODEL)))
        async with httpx.AsyncClient(transport=transport, base_url="http://kb") as c:
            return await c.get("/health")

    r = asyncio.run(ask())
    assert r.status_code == 503 and r.json() == {"status": "starting"}


def test_stream_follows_the_openai_chunk_format() -> None:
    backend = Recorder()
    jpeg, png = encoded("JPEG"), encoded("PNG")
    with live(backend) as c:
        events = sse_events(
            c, body([jpeg, png], 3, stream=True, stream_options={"include_usage": True})
        )
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {ch["object"] for ch in chunks} == {"chat.completion.chunk"}
    assert len({ch["id"] for ch in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    texts = [ch["choices"][0]["delta"].get("content") for ch in chunks[1:4]]
    assert texts == ["the", " the", " the"]
    assert chunks[4]["choices"][0]["finish_reason"] == "length"
    assert chunks[5]["choices"] == []
    assert chunks[5]["usage"] == {
        "prompt_tokens": 4,
        "completion_tokens": 3,
        "total_tokens": 7,
        "prompt_tokens_details": {
            "cached_tokens": 0,
            "text_tokens": 4,
            "image_tokens": 0,
            "prompt_tokens": 4,
        },
    }
    # the server passes the encoded files through, byte for byte
    [(rid, images, prompt_tokens)] = backend.calls
    assert images == [jpeg, png] and prompt_tokens == 4 and rid == chunks[0]["id"]


def test_no_usage_chunk_unless_asked_and_non_streaming_answer() -> None:
    with live(Recorder()) as c:
        events = sse_events(c, body([encoded()], 2, stream=True))
        plain = c.post(CHAT, json=body([encoded()], 2)).json()
    assert all("usage" not in json.loads(e) for e in events[:-1])
    assert plain["object"] == "chat.completion"
    assert plain["choices"][0]["message"]["content"] == "the the"
    assert plain["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize(
    ("payload", "status", "words"),
    [
        ("not json", 400, "bad request"),
        ({"model": MODEL}, 400, "messages must be a non-empty list"),
        ({"model": "other", "messages": [{"role": "user", "content": "x"}]}, 404, "does not exist"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            400,
            "max_tokens must be an integer",
        ),
        (
            {
                "model": MODEL,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
                    }
                ],
            },
            400,
            "only base64 data URLs",
        ),
        (
            {
                "model": MODEL,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}
                        ],
                    }
                ],
            },
            400,
            "not valid base64",
        ),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "audio"}]}]},
            400,
            "unsupported type 'audio'",
        ),
    ],
)
def test_bad_requests_are_rejected_before_the_backend(
    payload: Any, status: int, words: str
) -> None:
    backend = Recorder()
    with live(backend) as c:
        if isinstance(payload, str):
            r = c.post(CHAT, content=payload, headers={"Content-Type": "application/json"})
        else:
            r = c.post(CHAT, json=payload)
        metrics = parse_metrics(c.get("/metrics").text)
    assert r.status_code == status
    assert words in r.json()["error"]["message"]
    assert backend.calls == []
    key = ("kimi_bench_requests_total", (("outcome", "bad_request"),))
    assert metrics.values[key] == 1


def test_an_unreadable_image_is_refused_before_the_backend() -> None:
    backend = Recorder()
    with live(backend) as c:
        r = c.post(CHAT, json=body([encoded(), b"this is not an image"]))
        snap = parse_metrics(c.get("/metrics").text)
    assert r.status_code == 400 and backend.calls == []
    assert r.json()["error"]["message"] == (
        "image 1 (messages[0].content[2]) is not an image file PIL can read: "
        "PIL does not recognise its format"
    )
    assert snap.values[("kimi_bench_refused_requests_total", (("reason", "invalid_image"),))] == 1


def test_an_image_that_fails_to_decode_is_a_400_from_the_backend() -> None:
    buf = io.BytesIO()
    Image.effect_noise((128, 96), 50).convert("RGB").save(buf, "JPEG")
    truncated = buf.getvalue()[: buf.tell() // 2]  # the header reads, the data does not
    with live(SleepBackend()) as c:
        r = c.post(CHAT, json=body([truncated]))
    assert r.status_code == 400
    assert "image 0 cannot be decoded" in r.json()["error"]["message"]


def test_api_key_is_required_when_configured() -> None:
    with live(Recorder(), api_key="k1") as c:
        assert c.post(CHAT, json=body([encoded()])).status_code == 401
        assert c.get("/v1/models").status_code == 401
        ok = c.post(CHAT, json=body([encoded()]), headers={"Authorization": "Bearer k1"})
        assert ok.status_code == 200


def test_metrics_count_requests_latency_and_stage_bytes() -> None:
    jpeg = encoded(size=(40, 30))
    with live(SleepBackend()) as c:
        for _ in range(3):
            assert c.post(CHAT, json=body([jpeg, jpeg], 2)).status_code == 200
        snap = parse_metrics(c.get("/metrics").text)
    v = {series_name(n, lab): x for (n, lab), x in snap.values.items()}
    assert v['kimi_bench_requests_total{outcome="ok"}'] == 3
    assert v['kimi_bench_requests_total{outcome="error"}'] == 0
    assert v["kimi_bench_time_to_first_token_seconds_count"] == 3
    assert v['kimi_bench_stage_seconds_count{stage="decode"}'] == 3
    assert v['kimi_bench_stage_bytes_total{stage="images_in"}'] == 3 * 2 * len(jpeg)
    assert v['kimi_bench_stage_bytes_total{stage="decoded"}'] == 3 * 2 * 40 * 30 * 3
    assert v["kimi_bench_request_image_bytes_total"] == 3 * 2 * len(jpeg)
    assert v["kimi_bench_generation_tokens_total"] == 6
    assert v["kimi_bench_requests_running"] == 0


class Broken(Recorder):
    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int = 1
    ) -> FirstToken:
        raise RuntimeError("rank 3 died")


def test_backend_failures_become_http_errors_with_their_reason() -> None:
    faulty = FaultyBackend(SleepBackend(), "http500")
    with live(faulty) as c:
        r = c.post(CHAT, json=body([encoded()], stream=True))
    assert r.status_code == 500 and "injected fault http500" in r.json()["error"]["message"]
    with live(Broken()) as c:
        r = c.post(CHAT, json=body([encoded()], stream=True))
        snap = parse_metrics(c.get("/metrics").text)
    assert r.status_code == 500
    assert r.json()["error"]["message"] == "backend failed: RuntimeError: rank 3 died"
    assert snap.values[("kimi_bench_requests_total", (("outcome", "error"),))] == 1
    assert snap.values[("kimi_bench_requests_running", ())] == 0


def test_faults_hit_only_the_chosen_requests_and_shape_the_stream() -> None:
    faulty = FaultyBackend(SleepBackend(), "no_token", requests={1})
    with live(faulty) as c:
        runs = [sse_events(c, body([encoded()], 2, stream=True)) for _ in range(3)]
    contents = [
        [json.loads(e)["choices"][0]["delta"].get("content") for e in run[:-1]] for run in runs
    ]
    assert contents[0] == contents[2] == ["", "the", " the", None]
    assert contents[1] == ["", None]  # role chunk, then finish without any text
    assert json.loads(runs[1][1])["choices"][0]["finish_reason"] == "stop"

    with live(FaultyBackend(SleepBackend(), "malformed")) as c:
        raw = c.post(CHAT, json=body([encoded()], stream=True)).text
    assert '"delta": {"content": \n\n' in raw and raw.endswith("data: [DONE]\n\n")
    with pytest.raises(ValueError, match="fault mode must be one of"):
        FaultyBackend(SleepBackend(), "explode")


def test_a_client_that_goes_away_cancels_its_stalled_request_as_disconnected() -> None:
    backend = FaultyBackend(SleepBackend(), "stall", stall_s=600)
    app = create_app(backend, server_options(MODEL))
    with serve_in_thread(app) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + CHAT, json=body([encoded()], stream=True), timeout=0.3)
        key = ("kimi_bench_requests_total", (("outcome", "disconnected"),))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            snap = parse_metrics(httpx.get(url + "/metrics").text)
            if snap.values[key] == 1:
                break
            time.sleep(0.05)
        assert snap.values[key] == 1
        assert snap.values[("kimi_bench_requests_running", ())] == 0


def test_a_busy_port_is_a_clear_error() -> None:
    held = bind_socket("127.0.0.1", 0)
    try:
        with pytest.raises(ServerStartError, match=r"cannot listen on 127\.0\.0\.1"):
            bind_socket("127.0.0.1", held.getsockname()[1])
    finally:
        held.close()


SERVER_SCRIPT = """
import sys
from tests.backends import SleepBackend
from kimi_bench.serving.launch import serve
from kimi_bench.serving.server import create_app
from tests.server_options import server_options

class Noisy(SleepBackend):
    async def close(self):
        print("backend closed", flush=True)

sig = serve(create_app(Noisy(), server_options("m")), "127.0.0.1", int(sys.argv[1]))
print("stopped by signal", sig, flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_server_process_starts_answers_and_stops_cleanly(tmp_path: Path, sig: int) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    proc = ServerProcess(
        [sys.executable, "-c", SERVER_SCRIPT, str(port)], url, log, env=dict(os.environ)
    )
    with proc:
        assert proc.proc is not None
        assert httpx.get(url + "/health").json() == {"status": "ok"}
        r = httpx.post(url + CHAT, json={**body([encoded()]), "model": "m"})
        assert r.status_code == 200 and r.headers["server"].startswith("kimi-bench/")
        proc.proc.send_signal(sig)
        assert proc.proc.wait(30) == 0
    text = log.read_text()
    assert "backend closed" in text and f"stopped by signal {int(sig)}" in text


def test_server_process_that_dies_at_start_names_the_exit(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('boom: no such model'); sys.exit(4)"]
    proc = ServerProcess(
        argv, f"http://127.0.0.1:{free_port()}", tmp_path / "s.log", start_timeout_s=30
    )
    with pytest.raises(ServerStartError, match=r"exited with code 4.*boom: no such model"):
        proc.start()


def test_sleep_backend_reports_stages_and_in_flight() -> None:
    backend = SleepBackend(first_token_s=0.01)

    async def two() -> list[FirstToken]:
        return list(
            await asyncio.gather(*(backend.submit(str(i), [encoded()], 3) for i in range(2)))
        )

    firsts = asyncio.run(two())
    assert backend.submitted == 2 and backend.max_in_flight == 2 and backend.in_flight == 0
    for f in firsts:
        assert set(f.stages_s) == {"decode", "prefill"} and f.stages_s["prefill"] >= 0.01
        assert f.stage_bytes["decoded"] == 32 * 24 * 3 and f.prompt_tokens == 3
    with pytest.raises(BackendError, match="image 0 cannot be decoded"):
        asyncio.run(backend.submit("x", [b"junk"], 0))


# ------------------------------------------------ limits, disconnects, shutdown


def _refusals(c: httpx.Client) -> dict[str, float]:
    snap = parse_metrics(c.get("/metrics").text)
    return {
        dict(labels)["reason"]: v
        for (name, labels), v in snap.values.items()
        if name == "kimi_bench_refused_requests_total" and v
    }


def test_a_decompression_bomb_is_refused_from_its_header_before_the_backend() -> None:
    bomb = png_bomb(12000, 12000)  # 421 KB on the wire, 432 MB decoded
    assert len(bomb) < 500_000
    backend = Recorder()
    with live(backend) as c:
        r = c.post(CHAT, json=body([encoded(), bomb]))
        refusals = _refusals(c)
        assert c.get("/health").json() == {"status": "ok"}
    assert r.status_code == 400 and backend.calls == []
    assert r.json() == {
        "error": {
            "message": "image 1 (messages[0].content[2]) is 12000x12000 = 144,000,000 pixels, "
            "over the limit of 100,000,000 per image (kimi-bench serve --max-pixels)",
            "type": "invalid_request_error",
            "param": "messages[0].content[2]",
            "code": 400,
        }
    }
    assert refusals == {"image_too_large": 1}


def test_pixel_limits_per_image_per_request_and_pils_own() -> None:
    small = encoded(size=(100, 100))  # 10,000 pixels
    with live(Recorder(), max_pixels=10_000, max_request_pixels=25_000) as c:
        assert c.post(CHAT, json=body([small, small])).status_code == 200
        three = c.post(CHAT, json=body([small, small, small]))
        wide = c.post(CHAT, json=body([encoded(size=(101, 100))]))
    assert three.status_code == 400 and three.json()["error"]["message"] == (
        "the request's 3 images have 30,000 pixels together, over the limit of 25,000 per "
        "request (kimi-bench serve --max-request-pixels)"
    )
    assert wide.status_code == 400 and "is 101x100 = 10,100 pixels" in wide.text
    # the default request limit is 4x the image limit
    assert server_options(max_pixels=7).pixel_limits.per_request == 28
    # over PIL's own guard (2x Image.MAX_IMAGE_PIXELS): refused even with a higher limit
    with live(Recorder(), max_pixels=2**31) as c:
        r = c.post(CHAT, json=body([png_bomb(20000, 10000)]))
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith(
        "image 0 (messages[0].content[1]) is refused by PIL as a decompression bomb: "
        "Image size (200000000 pixels) exceeds limit of"
    )


def test_a_body_over_the_limit_is_a_413_declared_or_chunked() -> None:
    limit = 200_000

    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"x" * 10_000

    backend = Recorder()
    with live(backend, max_body_mb=limit / 2**20) as c:
        declared = c.post(CHAT, content=b"x" * 50_000_000)
        chunked = c.post(CHAT, content=chunks())  # no Content-Length: counted as it comes
        ok = c.post(CHAT, json=body([encoded()]))
        refusals = _refusals(c)
    assert declared.status_code == 413 and declared.headers["connection"] == "close"
    assert declared.json()["error"] == {
        "message": "the request body has 50,000,000 bytes (Content-Length), over the limit "
        "of 200,000 bytes (kimi-bench serve --max-body-mb)",
        "type": "invalid_request_error",
        "param": None,
        "code": 413,
    }
    assert chunked.status_code == 413
    assert chunked.json()["error"]["message"].startswith("the request body is larger, over")
    assert ok.status_code == 200 and len(backend.calls) == 1
    assert refusals == {"body_too_large": 2}


def test_a_client_that_leaves_mid_stream_is_counted_as_disconnected() -> None:
    backend = SleepBackend()
    app = create_app(backend, server_options(MODEL, decode_interval_ms=20.0))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, trust_env=False) as c:
        payload = body([encoded()], 4000, stream=True)
        with c.stream("POST", CHAT, json=payload) as r:
            lines = [ln for _, ln in zip(range(6), r.iter_lines(), strict=False)]
        assert any('"content": "the"' in ln for ln in lines)
        # a client gone while it still sends its body (reset, half a body sent)
        raw = json.dumps(body([encoded()], stream=True)).encode()
        head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(raw)}\r\n\r\n"
        with socket.create_connection(c.base_url.netloc.decode().split(":")) as s:
            s.sendall(head.encode() + raw[: len(raw) // 2])
        # /health and /metrics answer meanwhile; both requests end as disconnected
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert c.get("/health").json() == {"status": "ok"}
            outcomes = requests_by_outcome(c.get("/metrics").text)
            if outcomes["disconnected"] == 2:
                break
            time.sleep(0.05)
        assert outcomes["disconnected"] == 2 and outcomes["ok"] == 0
        assert (
            parse_metrics(c.get("/metrics").text).values[("kimi_bench_requests_running", ())] == 0
        )
        assert c.post(CHAT, json=body([encoded()])).status_code == 200


def test_stopping_the_server_ends_open_streams_and_waiting_requests() -> None:
    # request 0 streams for minutes; request 1 never gets its first token
    backend = FaultyBackend(SleepBackend(), "stall", requests={1})
    app = create_app(backend, server_options(MODEL, decode_interval_ms=50.0))
    server = serve_in_thread(app)
    url = server.__enter__()
    events: list[str] = []
    waiting: list[httpx.Response] = []
    first = threading.Event()

    def stream() -> None:
        payload = body([encoded()], 4000, stream=True)
        with (
            httpx.Client(base_url=url, timeout=60, trust_env=False) as c,
            connect_sse(c, "POST", CHAT, json=payload) as src,
        ):
            for e in src.iter_sse():
                events.append(e.data)
                first.set()

    def wait() -> None:
        waiting.append(httpx.post(url + CHAT, json=body([encoded()]), timeout=60))

    threads = [threading.Thread(target=stream)]
    threads[0].start()
    assert first.wait(30)
    threads.append(threading.Thread(target=wait))
    threads[1].start()
    deadline = time.monotonic() + 30
    while backend.count < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.__exit__(None, None, None)  # what SIGTERM does: uvicorn shuts down
    for t in threads:
        t.join(30)
    # the stream ended by the server's stop (an error event), not cut by uvicorn's
    # graceful timeout (which would end it without one)
    last = json.loads(events[-1])
    assert last == {
        "error": {
            "message": "the server is shutting down",
            "type": "server_error",
            "param": None,
            "code": 503,
        }
    }
    assert "[DONE]" not in events and len(events) < 4000
    assert waiting[0].status_code == 503
    assert waiting[0].json()["error"]["message"] == "the server is shutting down"
    outcomes = app.state.metrics.outcome_counts()
    assert outcomes == {"cancelled": 2} and backend.inner.closed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-pixels", "0"], "--max-pixels: Input should be greater than or equal to 1"),
        (["--max-request-pixels", "0"], "--max-request-pixels: Input should be greater than"),
        (["--max-body-mb", "0"], "--max-body-mb: Input should be greater than or equal to 0.001"),
        (["--max-body-mb", "nan"], "--max-body-mb: Input should be a finite number"),
    ],
)
def test_kimi_bench_serve_limit_options_are_bounded(args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from kimi_bench.cli.main import app

    res = CliRunner().invoke(app, ["serve", "--arm", "eager", "--device", "cpu", *args])
    assert res.exit_code == 2 and message in " ".join(res.output.split())


def test_kimi_bench_serve_help_names_the_limits_and_their_defaults() -> None:
    from typer.testing import CliRunner

    from kimi_bench.cli.main import app

    res = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    text = " ".join(res.output.split())
    assert res.exit_code == 0
    assert "--max-pixels" in text and "100000000" in text
    assert "--max-body-mb" in text and "64.0" in text
    assert "default:4x--max-pixels" in "".join(text.split())  # click may wrap at a hyphen
