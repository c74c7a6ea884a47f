"""Where a stream's TTFT ends: at the first chunk that carries text (content, reasoning_content
or reasoning, as sglang.bench_serving reads it), with the first chunk of any kind kept as
``first_chunk_s`` (where vllm bench serve's chat client ends it): a server that opens with
the role alone (transformers serve), kimi-bench serve, and a reasoning stream."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from kimi_bench.serving import request
from kimi_bench.serving.client import drive
from kimi_bench.serving.records import RequestRecord
from tests.backends import SleepBackend, serve_in_thread
from tests.integration.test_http_client import opts, server, trace_of


def _event(delta: dict, finish: str | None = None) -> str:
    return f"data: {json.dumps({'choices': [{'delta': delta, 'finish_reason': finish}]})}\n\n"


async def _role_first() -> Any:
    yield _event({"role": "assistant"})
    await asyncio.sleep(0.05)
    yield _event({"content": "a"})
    yield _event({"content": " b"}, "length")
    yield "data: [DONE]\n\n"


def _app() -> Starlette:
    async def chat(_: Request) -> StreamingResponse:
        return StreamingResponse(_role_first(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def test_a_role_only_first_chunk_is_kept_apart_from_the_first_token() -> None:
    with serve_in_thread(_app()) as url:
        [rec] = drive(url, trace_of(1), opts(max_tokens=2)).records
    assert rec.ok and rec.output_tokens == 2 and rec.token_chunks == 2 and len(rec.itl_ms) == 1
    assert rec.first_chunk_s is not None and rec.first_token_s is not None
    # the server slept 50 ms between them, but a loaded client may read both at once
    assert rec.first_chunk_s <= rec.first_token_s
    assert rec.to_dict()["first_chunk_s"] == rec.first_chunk_s


def test_kimi_bench_serve_records_its_first_chunk_no_later_than_the_first_token() -> None:
    backend = SleepBackend(first_token_s=0.01)
    with server(backend) as url:
        [rec] = drive(url, trace_of(1), opts()).records
    assert rec.first_chunk_s is not None and rec.first_token_s is not None
    assert rec.first_chunk_s <= rec.first_token_s


def _stream(*events: tuple[str, float]) -> RequestRecord:
    """The stream's own clock (the read times the wire hands it), without a network."""
    stream = request._Stream()
    for data, now in events:
        stream.take(data, now)
    rec = RequestRecord(rid=0, scheduled_s=0.0)
    stream.finish(rec, 10.0)
    stream.record(rec)
    return rec


def test_the_first_chunk_time_is_the_role_chunk_read_time() -> None:
    rec = _stream(
        (json.dumps({"choices": [], "usage": None}), 10.0),  # no choices: not a chunk
        (_event({"role": "assistant"})[6:], 10.5),
        (_event({"content": "a"}, "length")[6:], 11.25),
    )
    assert rec.first_chunk_s == 0.5 and rec.first_token_s == 1.25


def test_reasoning_is_text_whichever_field_carries_it() -> None:
    """vLLM's reasoning parsers stream ``reasoning``; older servers ``reasoning_content``."""
    rec = _stream(
        (_event({"role": "assistant"})[6:], 10.5),
        (_event({"reasoning": "think"})[6:], 11.0),
        (_event({"reasoning_content": "more"})[6:], 11.5),
        (_event({"content": "a"}, "length")[6:], 12.0),
    )
    assert rec.first_token_s == 1.0 and rec.token_chunks == 3
    assert rec.itl_ms == [500.0, 500.0]
