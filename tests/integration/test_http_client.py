"""The streaming client against the test server on loopback: what it records per request,
each failure reason, a dead endpoint, the concurrency cap, the API key, server info, the
Prometheus deltas, and the same server measured twice as two arms."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import math
import os
import re
import signal
import statistics
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from kimi_bench.options import ServeOptions
from kimi_bench.serving.client import ClientOptions, drive, parse_endpoint, probe_server
from kimi_bench.serving.launch import ServerProcess, free_port
from kimi_bench.serving.metrics import (
    HistogramDelta,
    MetricsError,
    metrics_delta,
    parse_metrics,
    scrape_metrics,
)
from kimi_bench.serving.records import ERROR_KINDS, RequestRecord
from kimi_bench.serving.server import create_app
from kimi_bench.serving.trace import chat_body, make_trace, parse_data_url
from tests.backends import FaultyBackend, SleepBackend, serve_in_thread
from tests.server_options import server_options

MODEL = "test-model"
KEY_ENV = "KIMI_BENCH_TEST_API_KEY"
SECRET = "sk-test-5f0c1d2e-never-in-records"


def jpeg(size: tuple[int, int] = (32, 24)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 120, 240)).save(buf, "JPEG")
    return buf.getvalue()


def trace_of(n: int, gap_s: float = 0.0, images_per_request: int = 1) -> Any:
    return make_trace([i * gap_s for i in range(n)], [jpeg(), jpeg((20, 20))], images_per_request)


def opts(**kw: Any) -> ClientOptions:
    base = ClientOptions.from_options(ServeOptions(), MODEL)
    return dataclasses.replace(base, **{"api_key_env": KEY_ENV, "warmup_requests": 0, **kw})


@contextlib.contextmanager
def server(backend: Any, **server_opts: Any) -> Iterator[str]:
    app = create_app(backend, server_options(MODEL, **server_opts))
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


# ---------------------------------------------------------------- trace and request body


def test_trace_assigns_pool_images_round_robin_and_validates() -> None:
    pool = [b"a", b"b", b"c"]
    t = make_trace([0.0, 0.1, 0.2], pool, images_per_request=2)
    assert t.image_keys == ((0, 1), (2, 0), (1, 2))
    assert t.request_images(1) == [b"c", b"a"]
    with pytest.raises(ValueError, match="non-decreasing"):
        make_trace([0.2, 0.1], pool)
    with pytest.raises(ValueError, match="mime must be one of"):
        make_trace([0.0], pool, mime="image/tiff")
    with pytest.raises(ValueError, match="an image pool is needed"):
        make_trace([0.0], [])


def test_chat_body_carries_prompt_images_as_data_urls_and_extras() -> None:
    t = make_trace([0.0, 0.0], [b"\x00\xffjpegbytes", b"png"], images_per_request=2, prompt="hi")
    b = chat_body(t, 0, "m", 3, extra={"ignore_eos": True})
    assert b["model"] == "m" and b["max_tokens"] == 3 and b["stream"] is True
    assert b["stream_options"] == {"include_usage": True} and b["ignore_eos"] is True
    parts = b["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "hi"}
    urls = [p["image_url"]["url"] for p in parts[1:]]
    assert [parse_data_url(u) for u in urls] == [
        ("image/jpeg", b"\x00\xffjpegbytes"),
        ("image/jpeg", b"png"),
    ]
    assert "stream_options" not in chat_body(t, 1, "m", 1, include_usage=False)
    with pytest.raises(ValueError, match="not base64 encoded"):
        parse_data_url("data:image/png,rawbytes")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a", "takes NAME=URL"),
        ("=http://x", "takes NAME=URL"),
        ("a=ftp://x", "must be http(s)"),
        ("a=http://h/v1/chat/completions", "not a path under /v1"),
        ("a=http://h/v1/models/", "not a path under /v1"),
    ],
)
def test_parse_endpoint_names_what_is_wrong(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        parse_endpoint(text)


def test_parse_endpoint_keeps_name_and_base_url() -> None:
    assert parse_endpoint("base=http://127.0.0.1:30000/") == ("base", "http://127.0.0.1:30000")
    assert parse_endpoint(" new = https://h.example/sglang ") == ("new", "https://h.example/sglang")
    # the OpenAI base URL many tools print: /v1 is dropped (the client adds /v1/...)
    assert parse_endpoint("a=http://127.0.0.1:30000/v1/") == ("a", "http://127.0.0.1:30000")


# ---------------------------------------------------------------- the happy path


def test_happy_path_records_ttft_e2e_itl_tokens_and_progress() -> None:
    seen: list[tuple[int, int, int]] = []
    backend = SleepBackend(first_token_s=0.01)
    with server(backend, decode_interval_ms=2.0) as url:
        res = drive(
            url,
            trace_of(6, 0.01),
            opts(max_tokens=3),
            progress=lambda rec, done, planned: seen.append((rec.rid, done, planned)),
        )
    assert res.error is None and res.completed == 6 and res.failed == 0 and res.unsent == 0
    assert [r.rid for r in res.records] == list(range(6))
    assert sorted(d for _, d, _ in seen) == list(range(1, 7)) and {p for *_, p in seen} == {6}
    for r in res.records:
        assert r.ok and r.status == 200 and r.error is None and r.output_tokens == 3
        assert r.ttft_ms is not None and r.e2e_ms is not None
        assert r.ttft_ms >= 10.0  # the backend waits 10 ms before the first token
        assert r.e2e_ms >= r.ttft_ms and len(r.itl_ms) == 2 and min(r.itl_ms) > 0
        assert r.sent_s is not None and r.sent_s >= r.scheduled_s
    assert backend.submitted == 6
    d = json.loads(json.dumps(res.to_dict()))
    assert {"ttft_ms", "e2e_ms", "itl_ms", "status", "error", "queue_ms"} <= set(d["records"][0])


def test_one_token_has_no_itl_and_warmup_is_kept_apart() -> None:
    backend = SleepBackend()
    with server(backend) as url:
        res = drive(url, trace_of(3), opts(warmup_requests=2))
    assert res.completed == 3 and [r.itl_ms for r in res.records] == [[], [], []]
    assert [r.output_tokens for r in res.records] == [1, 1, 1]
    assert len(res.warmup) == 2 and all(w.warmup and w.ok for w in res.warmup)
    assert backend.submitted == 5


def test_max_concurrency_caps_requests_in_flight() -> None:
    backend = SleepBackend(first_token_s=0.05)
    with server(backend) as url:
        res = drive(url, trace_of(6), opts(max_concurrency=2))
    assert res.completed == 6 and backend.max_in_flight <= 2
    # 6 arrive at once, 2 slots: the last four wait at least one 50 ms backend turn
    waits = sorted(r.queue_ms or 0.0 for r in res.records)
    assert all(w >= 50.0 for w in waits[2:])


# ---------------------------------------------------------------- failures


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "kind", "words", "status"),
    [
        ("http500", "http", "HTTP 500 Internal Server Error: ", 500),
        ("no_token", "no_token", "stream ended without a token (finish_reason=stop", 200),
        ("malformed", "malformed", "event data is not JSON", 200),
        ("reset", "read", "connection broke after 0 token chunk(s)", 200),
        ("stall", "timeout", "no complete response within 1 s: no response", None),
    ],
)
def test_each_failure_is_recorded_with_its_reason_and_the_run_goes_on(
    mode: str, kind: str, words: str, status: int | None
) -> None:
    backend = FaultyBackend(SleepBackend(), mode, requests={1}, stall_s=600)
    with server(backend) as url:
        res = drive(url, trace_of(3, 0.02), opts(max_tokens=2, request_timeout_s=1.0))
    ok0, bad, ok2 = res.records
    assert ok0.ok and ok2.ok and res.error is None and res.completed == 2
    assert not bad.ok and bad.error_kind == kind and bad.status == status
    assert bad.error is not None and words in bad.error, bad.error
    assert bad.ttft_ms is None and bad.e2e_ms is not None
    if mode == "http500":
        assert "injected fault http500 on request 1" in bad.error  # the body excerpt


def test_http_4xx_keeps_status_and_body_excerpt() -> None:
    with server(SleepBackend()) as url:
        res = drive(url, trace_of(2), opts(model="no-such-model"))
    assert {r.error_kind for r in res.records} == {"http"}
    assert {r.status for r in res.records} == {404}
    assert all("does not exist" in (r.error or "") for r in res.records)


def test_connection_refused_is_recorded_per_request() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    res = drive(url, trace_of(3), opts(dead_after=100))
    assert res.error is None and len(res.records) == 3
    for r in res.records:
        assert r.error_kind == "connect" and r.status is None
        assert r.error is not None and r.error.startswith(f"cannot connect to {url}")


def test_a_dead_endpoint_ends_the_arm_and_keeps_the_records() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    res = drive(url, trace_of(20, 0.1), opts(dead_after=3))
    assert res.error is not None
    assert f"endpoint {url} looks dead: 3 consecutive connection failures" in res.error
    assert len(res.records) >= 3 and res.unsent == 20 - len(res.records) and res.unsent > 0
    assert {r.error_kind for r in res.records} <= {"connect", "cancelled"}


def odd_server_app() -> Starlette:
    """A misbehaving endpoint: the model name picks how it answers."""

    async def chat(request: Request) -> Response:
        model = (await request.json())["model"]
        if model == "json":  # ignores stream: true
            return JSONResponse({"choices": [{"message": {"content": "x"}}]})
        if model == "error":
            text = 'data: {"error": {"message": "out of KV cache"}}\n\ndata: [DONE]\n\n'
            return Response(text, media_type="text/event-stream")
        if model == "keepalive":  # named non-message events are not chunks
            chunk = {"choices": [{"delta": {"content": "hi"}, "finish_reason": "length"}]}
            text = f"event: ping\ndata: {{}}\n\n: comment\n\ndata: {json.dumps(chunk)}\n\n"
            return Response(text + "data: [DONE]\n\n", media_type="text/event-stream")
        if model == "empty-token":  # a token that decodes to no text, as usage says
            chunks = [
                {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"delta": {}, "finish_reason": "length"}]},
                {"choices": [], "usage": {"completion_tokens": 1}},
            ]
            text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            return Response(text, media_type="text/event-stream")
        echo = request.headers.get("authorization", "")  # a server that leaks the header
        return Response(f"bad credentials {echo}", status_code=500)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@pytest.mark.parametrize(
    ("model", "ok", "kind", "words"),
    [
        ("json", False, "malformed", "response is not an event stream"),
        ("error", False, "server_error", "error in stream: out of KV cache"),
        ("empty-token", True, None, None),
        ("keepalive", True, None, None),
    ],
)
def test_odd_streams(model: str, ok: bool, kind: str | None, words: str | None) -> None:
    with serve_in_thread(odd_server_app()) as url:
        [rec] = drive(url, trace_of(1), opts(model=model)).records
    assert rec.ok is ok and rec.error_kind == kind
    if words:
        assert rec.error is not None and words in rec.error
    else:
        assert rec.output_tokens == 1 and rec.ttft_ms is not None


# ---------------------------------------------------------------- the API key


def test_api_key_is_sent_but_never_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with server(SleepBackend(), api_key=SECRET) as url:
        res = drive(url, trace_of(2), opts())
        info = probe_server(url, api_key_env=KEY_ENV)
    assert res.completed == 2  # the server accepted the key
    assert info.model == MODEL
    with serve_in_thread(odd_server_app()) as url:
        leaked = drive(url, trace_of(1), opts(model="echo")).records[0]
    assert leaked.error is not None and "bad credentials Bearer <redacted>" in leaked.error
    everything = json.dumps([res.to_dict(), info.to_dict(), leaked.to_dict()])
    assert SECRET not in everything


def test_without_the_key_a_protected_server_answers_401() -> None:
    with server(SleepBackend(), api_key=SECRET) as url:
        [rec] = drive(url, trace_of(1), opts()).records
    assert rec.error_kind == "http" and rec.status == 401


# ---------------------------------------------------------------- server info and metrics


def test_probe_server_reads_models_version_and_server_header() -> None:
    with server(SleepBackend(), version="1.2.3") as url:
        info = probe_server(url)
    assert info.error is None and info.model == MODEL
    assert info.version == "1.2.3" and info.version_source == "GET /version"
    assert info.server_header is not None and info.server_header.startswith("kimi-bench/")
    dead = probe_server(f"http://127.0.0.1:{free_port()}")
    assert dead.error is not None and dead.error.startswith("cannot reach") and dead.models == []


def test_metrics_scrape_deltas_cover_one_phase() -> None:
    image = jpeg()
    trace = make_trace([0.0] * 5, [image])
    with server(SleepBackend()) as url:
        drive(url, trace_of(2), opts())  # before the phase: must not count
        before = scrape_metrics(url)
        res = drive(url, trace, opts(max_tokens=2))
        delta = metrics_delta(before, scrape_metrics(url))
    assert res.completed == 5
    assert delta.counters['kimi_bench_requests_total{outcome="ok"}'] == 5
    assert delta.counters['kimi_bench_stage_bytes_total{stage="images_in"}'] == 5 * len(image)
    assert delta.counters["kimi_bench_generation_tokens_total"] == 10
    ttft = delta.histograms["kimi_bench_time_to_first_token_seconds"]
    assert ttft.count == 5 and ttft.buckets[-1] == (math.inf, 5.0) and ttft.sum > 0
    assert delta.gauges["kimi_bench_requests_running"] == {"before": 0.0, "after": 0.0}
    assert delta.resets == []


def test_metrics_delta_handles_resets_new_series_summaries_and_created() -> None:
    before = parse_metrics(
        "# TYPE sglang:num_requests_total counter\n"
        'sglang:num_requests_total{model_name="m"} 10\n'
        "# TYPE sglang:num_requests_created gauge\n"
        'sglang:num_requests_created{model_name="m"} 1.7e9\n'
        "# TYPE lat summary\nlat_sum 4.0\nlat_count 2\n"
        "untyped_total 1\n"
    )
    after = parse_metrics(
        "# TYPE sglang:num_requests_total counter\n"
        'sglang:num_requests_total{model_name="m"} 3\n'
        "# TYPE tokens_total counter\ntokens_total 7\n"
        "untyped_total 4\nuntyped_gauge 2\n"
        "# TYPE lat summary\nlat_sum 10.0\nlat_count 5\n"
        "# TYPE ttft histogram\n"
        'ttft_bucket{le="0.1"} 2\nttft_bucket{le="1.0"} 6\nttft_bucket{le="+Inf"} 8\n'
        "ttft_sum 3.0\nttft_count 8\n"
    )
    d = metrics_delta(before, after)
    assert d.counters['sglang:num_requests_total{model_name="m"}'] == 3  # reset: all new
    assert d.resets == ['sglang:num_requests_total{model_name="m"}']
    assert d.counters["tokens_total"] == 7 and d.counters["lat_sum"] == 6.0
    assert d.counters["lat_count"] == 3 and d.counters["untyped_total"] == 3
    assert d.gauges["untyped_gauge"] == {"before": None, "after": 2.0}
    assert not any("created" in k for k in d.counters)
    h = d.histograms["ttft"]
    assert h.buckets == [(0.1, 2.0), (1.0, 6.0), (math.inf, 8.0)] and h.count == 8
    assert h.mean() == 3.0 / 8
    # rank 4 of 8 lies in (0.1, 1.0] holding ranks 3..6: 0.1 + 0.9 * (4 - 2) / 4
    assert h.quantile(0.5) == pytest.approx(0.55)
    assert h.quantile(1.0) == 1.0  # the +Inf bucket answers its lower bound
    assert HistogramDelta().quantile(0.5) is None
    with pytest.raises(MetricsError, match="not Prometheus text format"):
        parse_metrics("this is { not metrics\n")


def test_scrape_of_an_endpoint_without_metrics_is_a_clear_error() -> None:
    with serve_in_thread(odd_server_app()) as url, pytest.raises(MetricsError, match="HTTP 404"):
        scrape_metrics(url)


# ---------------------------------------------------------------- two arms, Ctrl-C


SERVER_SCRIPT = """
import sys
from tests.backends import SleepBackend
from kimi_bench.serving.launch import serve
from kimi_bench.serving.server import create_app
from tests.server_options import server_options

app = create_app(SleepBackend(first_token_s=0.03), server_options(sys.argv[2]))
serve(app, "127.0.0.1", int(sys.argv[1]))
"""


@pytest.mark.slow
def test_the_same_server_process_as_two_arms_gives_a_near_zero_delta(tmp_path: Path) -> None:
    from kimi_bench.serving.trace import arrival_offsets

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-c", SERVER_SCRIPT, str(port), MODEL]
    trace = make_trace(arrival_offsets(40.0, 16, seed=3), [jpeg(), jpeg((24, 32))])
    with ServerProcess(argv, url, tmp_path / "server.log", env=dict(os.environ)):
        info = probe_server(url)
        arms = [drive(url, trace, opts(warmup_requests=1)) for _ in range(2)]
    assert info.model == MODEL and info.version_source == "GET /version"
    medians = []
    for arm in arms:
        assert arm.completed == 16 and arm.error is None and arm.unsent == 0
        ttft = [r.ttft_ms for r in arm.records if r.ttft_ms is not None]
        assert len(ttft) == 16 and min(ttft) >= 30.0  # the backend's 30 ms is a floor
        medians.append(statistics.median(ttft))
    # a generous bound: the same server twice may differ by noise, not by a factor
    assert abs(medians[1] - medians[0]) / max(medians) < 0.5, medians


class _CtrlCAtStall(FaultyBackend):
    """Stalls request 2 and, once requests 0 and 1 are answered, sends this process the
    Ctrl-C (SIGINT) a terminal would: when it comes depends on the run, not on a clock."""

    def __init__(self) -> None:
        super().__init__(SleepBackend(), "stall", requests={2}, stall_s=600)
        self.answered = 0

    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int = 1
    ) -> Any:
        if self.count != 2:
            first = await super().submit(request_id, images, prompt_tokens, max_tokens)
            self.answered += 1
            return first
        while self.answered < 2:  # the stalled request may arrive before 0 and 1 finish
            await asyncio.sleep(0.01)
        # both answers are sent; 1 s covers the client reading their last bytes on a
        # loaded host (the stalled request holds the run open meanwhile)
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        return await super().submit(request_id, images, prompt_tokens, max_tokens)


@pytest.mark.slow
def test_ctrl_c_keeps_the_records_so_far(sigint_default: None) -> None:
    with server(_CtrlCAtStall()) as url:
        res = drive(url, trace_of(3, 0.05), opts(request_timeout_s=60))
    assert res.error == "interrupted by SIGINT (Ctrl-C)"
    assert [r.ok for r in res.records] == [True, True, False]
    assert res.records[2].error_kind == "cancelled"


def test_error_kinds_are_closed() -> None:
    rec = RequestRecord(rid=0, scheduled_s=0.0)
    with pytest.raises(ValueError, match="unknown error kind"):
        rec.fail("weird", "x")
    assert {"connect", "http", "timeout", "no_token", "malformed"} <= set(ERROR_KINDS)
    with pytest.raises(ValueError, match="--max-tokens must be >= 1"):
        drive("http://127.0.0.1:1", trace_of(1), opts(max_tokens=0))
