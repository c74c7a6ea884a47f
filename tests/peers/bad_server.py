"""A small third-party OpenAI-compatible server for tests: streams chat completions like
vLLM/SGLang do (role chunk, one chunk per token, a finish_reason, a usage chunk, ``[DONE]``)
and sends no kimi-bench batch header. The first path segment picks one way to misbehave,
so one server gives every endpoint of a test its own behaviour::

    http://127.0.0.1:PORT/ok            healthy (also plain http://127.0.0.1:PORT)
    http://127.0.0.1:PORT/http500       HTTP 500 with a JSON error body
    http://127.0.0.1:PORT/http429       HTTP 429 with ``Retry-After: 1``
    http://127.0.0.1:PORT/every2nd429   every second request is a 429 (Retry-After: 1)
    http://127.0.0.1:PORT/badsse        a 200 whose body is not an event stream
    http://127.0.0.1:PORT/nonjson       events whose data is not JSON
    http://127.0.0.1:PORT/errorevent    one token, then an ``{"error": ...}`` event
    http://127.0.0.1:PORT/drop          one token, then the connection breaks
    http://127.0.0.1:PORT/truncate      one token, then a clean end (no finish, no [DONE])
    http://127.0.0.1:PORT/stallheaders  no response headers for a minute
    http://127.0.0.1:PORT/stalltoken    headers, then no token for a minute
    http://127.0.0.1:PORT/stallstream   one token, then nothing for a minute

Run in a thread with :func:`running` (tests) or ``python -m tests.peers.bad_server PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL = "peer-model"
MODES = ("ok", "http500", "http429", "every2nd429", "badsse", "nonjson", "errorevent", "drop",
         "truncate", "stallheaders", "stalltoken", "stallstream")  # fmt: skip
FIRST_TOKEN_S = 0.02  # "prefill"
TOKEN_S = 0.002  # "decode"
STALL_S = 60.0
_counts: dict[str, itertools.count[int]] = {m: itertools.count() for m in MODES}


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
    obj: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        obj["usage"] = usage
    return f"data: {json.dumps(obj)}\n\n".encode()


async def _events(mode: str, max_tokens: int) -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    if mode == "stalltoken":
        await asyncio.sleep(STALL_S)
    await asyncio.sleep(FIRST_TOKEN_S)
    if mode == "nonjson":
        yield b"data: this is not json\n\n"
        return
    for i in range(max_tokens):
        if i:
            await asyncio.sleep(TOKEN_S)
        yield _chunk({"content": f"w{i} "}, "length" if i == max_tokens - 1 else None)
        if mode == "errorevent":
            yield b'data: {"error": {"message": "engine overloaded", "code": 503}}\n\n'
            return
        if mode == "drop":
            raise ConnectionResetError("bad_server: drop")  # uvicorn aborts the response
        if mode == "truncate":
            return
        if mode == "stallstream":
            await asyncio.sleep(STALL_S)
    yield _chunk({}, usage={"prompt_tokens": 16, "completion_tokens": max_tokens})
    yield b"data: [DONE]\n\n"


async def chat(request: Request) -> Response:
    mode = request.path_params.get("mode", "ok")
    if mode not in MODES:
        return JSONResponse({"error": {"message": f"no mode {mode}"}}, status_code=404)
    n = next(_counts[mode])
    body = await request.json()
    if mode == "http500":
        return JSONResponse({"error": {"message": "internal failure"}}, status_code=500)
    if mode == "http429" or (mode == "every2nd429" and n % 2 == 0):
        err = {"error": {"message": "rate limited"}}
        return JSONResponse(err, status_code=429, headers={"Retry-After": "1"})
    if mode == "badsse":
        return Response("<html>gateway page</html>", media_type="text/html")
    if mode == "stallheaders":
        await asyncio.sleep(STALL_S)
    tokens = max(1, int(body.get("max_tokens") or body.get("max_completion_tokens") or 1))
    return StreamingResponse(_events(mode, tokens), media_type="text/event-stream")


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})


def app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/{mode}/v1/chat/completions", chat, methods=["POST"]),
            Route("/{mode}/v1/models", models),
        ]
    )


@contextlib.contextmanager
def running(port: int) -> Iterator[str]:
    """The server on 127.0.0.1:``port`` in a thread of this process; yields its base URL."""
    for mode in MODES:
        _counts[mode] = itertools.count()
    config = uvicorn.Config(
        app(), host="127.0.0.1", port=port, log_level="critical", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not server.started:
        raise RuntimeError("bad_server did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


if __name__ == "__main__":
    uvicorn.run(app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
