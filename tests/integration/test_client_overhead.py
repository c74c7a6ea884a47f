"""The load generator's own cost (issue 22 item 2): every request record carries its
scheduled, sent and actual-send times and the send's lateness; the serve-ab report shows
client minus server TTFT ("client overhead") when the server's /metrics has a TTFT
histogram and says why not when it has none; late sends (forced through the client's
``before_send`` seam) raise a warning. No timing thresholds: only presence and signs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.bench.serve_http import HttpServeOptions, run_serve_ab_http
from kimi_bench.bench.serve_overhead import TTFT_HISTOGRAMS, server_ttft
from kimi_bench.options import ServeOptions
from kimi_bench.report.model import Report
from kimi_bench.report.view import view_of
from kimi_bench.schemas import validate_report
from kimi_bench.serving.client import ClientOptions, drive
from kimi_bench.serving.server import create_app
from kimi_bench.serving.trace import arrival_offsets
from kimi_bench.serving.wire import sse_events
from tests.backends import SleepBackend, serve_in_thread
from tests.integration.test_http_client import trace_of
from tests.server_options import server_options

MODEL = "test-model"


@contextlib.contextmanager
def kimi_bench_serve() -> Iterator[str]:
    """kimi-bench serve's app (its /metrics has the TTFT histogram) in a thread."""
    app = create_app(SleepBackend(first_token_s=0.01), server_options(MODEL))
    with serve_in_thread(app) as url:
        yield url


def metrics_less_app() -> Starlette:
    """An OpenAI-compatible streaming server without /metrics (404 there)."""

    async def chat(request: Request) -> Response:
        await request.body()
        chunk = {"choices": [{"delta": {"content": "hi"}, "finish_reason": "length"}]}
        text = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        return Response(text, media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def serve_ab(url: str, before_send: Any = None) -> Any:
    """serve-ab against one endpoint: (report, runs)."""
    opts = ServeOptions(endpoints=[f"a={url}"], rates=(math.inf,), requests=6, repeats=1,
                        resolution=(32, 24), warmup_requests=1, device="cpu",
                        model=MODEL)  # fmt: skip
    runs = run_serve_ab_http(HttpServeOptions.from_options(opts, None, before_send))
    return build_serve_report(opts, runs, torch.device("cpu"), None), runs


def test_a_burst_records_scheduled_sent_and_lateness_per_request() -> None:
    trace = trace_of(8)  # a burst: every offset is 0
    with kimi_bench_serve() as url:
        res = drive(url, trace, ClientOptions.from_options(ServeOptions(warmup_requests=0), MODEL))
    assert res.completed == 8
    for rec in res.records:
        assert rec.scheduled_s == 0.0 and rec.sent_s is not None and rec.wire_sent_s is not None
        assert rec.wire_sent_s >= rec.sent_s >= rec.scheduled_s
        assert rec.lateness_ms is not None and rec.lateness_ms >= 0
        d = rec.to_dict()
        assert d["lateness_ms"] == rec.lateness_ms and d["wire_sent_s"] == rec.wire_sent_s


def test_paced_arrivals_are_sent_at_their_offsets_not_before() -> None:
    offsets = arrival_offsets(50.0, 6, seed=3)
    trace = trace_of(6)
    trace = type(trace)(offsets, trace.images, trace.image_keys)
    with kimi_bench_serve() as url:
        res = drive(url, trace, ClientOptions.from_options(ServeOptions(warmup_requests=0), MODEL))
    for rec, offset in zip(res.records, offsets, strict=True):
        assert rec.scheduled_s == offset and rec.sent_s is not None and rec.sent_s >= offset


def test_report_shows_client_overhead_when_metrics_has_the_ttft_histogram() -> None:
    with kimi_bench_serve() as url:
        report, runs = serve_ab(url)
    [row] = report.data["client_overhead"]
    assert server_ttft(runs[0]) is not None
    assert row["arm"] == "a" and row["server_metric"] == TTFT_HISTOGRAMS[0]
    assert row["requests"] == row["server_requests"] == 6  # the warm-up is outside the window
    assert row["client_overhead_ms"] == pytest.approx(
        row["client_ttft_mean_ms"] - row["server_ttft_mean_ms"]
    )
    assert row["client_ttft_mean_ms"] > 0 and row["server_ttft_mean_ms"] > 0
    assert row["send_lateness_p99_ms"] is not None
    assert any(n.startswith("client overhead = client mean TTFT") for n in report.notes)
    # every request record and row carries the send's times and lateness
    for rec in runs[0].records:
        assert rec.client is not None
        assert {"scheduled", "sent", "wire_sent"} <= set(rec.client.times_s)
        assert rec.client.lateness_ms is not None
    assert all(r["send_lateness_s"] is not None for r in report.data["requests"])
    assert any(t.title.startswith("Client overhead") for t in view_of(report).tables)
    # the existing fields are untouched; the report validates (schema and typed model)
    assert report.results[0]["completed"] == 6 and "ttft_mean_ms" in report.results[0]
    validate_report(report.to_dict())
    assert (
        Report.from_dict(report.to_dict()).data["client_overhead"]
        == report.to_dict()["client_overhead"]
    )


def test_report_omits_client_overhead_with_a_note_when_metrics_has_no_histogram() -> None:
    with serve_in_thread(metrics_less_app()) as url:
        report, _ = serve_ab(url)
    [row] = report.data["client_overhead"]
    assert row["client_overhead_ms"] is None and row["server_ttft_mean_ms"] is None
    assert row["client_ttft_mean_ms"] is not None
    [note] = [n for n in report.notes if n.startswith("client overhead not measured for a")]
    assert "HTTP 404" in note and TTFT_HISTOGRAMS[1] in note


def test_late_sends_raise_a_warning_in_the_report() -> None:
    async def late(i: int) -> None:  # the seam: every send 20 ms after its time
        await asyncio.sleep(0.02)

    with kimi_bench_serve() as url:
        report, runs = serve_ab(url, before_send=late)
    assert all(r.client and (r.client.lateness_ms or 0) >= 20.0 for r in runs[0].records)
    # (the test double bills no image tokens: that is a warning of its own)
    [warning] = [w for w in report.summary["client_warnings"] if "send lateness" in w]
    assert warning.startswith("WARNING: send lateness p99") and "> 5 ms at inf, a" in warning
    assert warning in report.notes
    validate_report(report.to_dict())


def test_sse_events_split_as_the_format_says() -> None:
    body = [b"data: {\"a\":", b" 1}\r\n\r\n: comment\n\nevent: ping\ndata: x\n\n",
            b"data: one\ndata: two\n\ndata: [DONE]\n\n", b"data: cut"]  # fmt: skip

    async def chunks() -> Any:
        for c in body:
            yield c

    async def collect() -> list[tuple[str, str]]:
        return [(e, d) async for e, d, _ in sse_events(chunks(), lambda: 0.0)]

    assert asyncio.run(collect()) == [
        ("", '{"a": 1}'),
        ("ping", "x"),
        ("", "one\ntwo"),
        ("", "[DONE]"),
    ]
