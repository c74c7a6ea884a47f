"""An OpenAI-compatible streaming server (Starlette) over a pluggable :class:`Backend`.

Routes: ``POST /v1/chat/completions`` (streaming or not), ``GET /v1/models``,
``GET /health``, ``GET /version``, ``GET /metrics`` (Prometheus text). Images arrive as
base64 data URLs; the server decodes the base64 only and hands the encoded file bytes
(JPEG/PNG) to the backend, which decodes them as a real server's processor does. The
first token is sent when ``Backend.submit`` returns; later tokens (``max_tokens > 1``)
follow every ``ServerOptions.decode_interval_s``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kimi_bench import __version__
from kimi_bench.serving.backend import REQUEST_HEADER, Backend, BackendError, FirstToken
from kimi_bench.serving.server_metrics import ServerMetrics
from kimi_bench.serving.trace import parse_data_url


@dataclass(frozen=True)
class ServerOptions:
    model: str = "kimi-bench-emulator"
    decode_interval_s: float = 0.0  # between streamed tokens after the first
    api_key: str | None = None  # when set, /v1/* needs "Authorization: Bearer <key>"
    default_max_tokens: int = 1
    max_tokens_limit: int = 4096
    version: str = __version__


@dataclass
class _Chat:
    images: list[bytes]
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return JSONResponse(body, status_code=status)


def _parse_content(content: Any, where: str, images: list[bytes], texts: list[str]) -> None:
    if isinstance(content, str):
        texts.append(content)
        return
    if not isinstance(content, list):
        raise ValueError(f"{where}.content must be a string or a list of parts")
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            ref = part.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            try:
                images.append(parse_data_url(str(url))[1])
            except ValueError as exc:
                raise ValueError(f"{where}.content[{j}]: {exc}") from None
        else:
            raise ValueError(f"{where}.content[{j}] has unsupported type {kind!r}")


def parse_chat(body: Any, opts: ServerOptions) -> _Chat:
    """Validate a chat-completions body; ValueError names the first problem, LookupError
    an unknown model. Prompt tokens are estimated as whitespace-separated words of the
    text parts (a backend that knows better reports ``FirstToken.prompt_tokens``)."""
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    if body.get("model") != opts.model:
        raise LookupError(
            f"the model {body.get('model')!r} does not exist (serving {opts.model!r})"
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    images: list[bytes] = []
    texts: list[str] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise ValueError(f"messages[{i}] must be an object")
        _parse_content(msg.get("content", ""), f"messages[{i}]", images, texts)
    raw = body.get("max_completion_tokens", body.get("max_tokens", opts.default_max_tokens))
    if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= opts.max_tokens_limit:
        raise ValueError(f"max_tokens must be an integer in [1, {opts.max_tokens_limit}]")
    options = body.get("stream_options") or {}
    return _Chat(
        images=images,
        prompt_tokens=sum(len(t.split()) for t in texts),
        max_tokens=raw,
        stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
    )


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body is already read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class _Handler:
    def __init__(self, backend: Backend, opts: ServerOptions, metrics: ServerMetrics) -> None:
        self.backend, self.opts, self.metrics = backend, opts, metrics
        self.ready = False

    def _authorized(self, request: Request) -> bool:
        if self.opts.api_key is None:
            return True
        return request.headers.get("authorization") == f"Bearer {self.opts.api_key}"

    async def health(self, request: Request) -> Response:
        return JSONResponse(
            {"status": "ok" if self.ready else "starting"}, 200 if self.ready else 503
        )

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": self.opts.version})

    async def models(self, request: Request) -> Response:
        if not self._authorized(request):
            return _error(401, "invalid or missing API key", "authentication_error")
        card = {"id": self.opts.model, "object": "model", "owned_by": "kimi-bench"}
        return JSONResponse({"object": "list", "data": [{**card, "created": 0}]})

    async def metrics_text(self, request: Request) -> Response:
        body, content_type = self.metrics.exposition()
        return Response(body, media_type=content_type)

    async def chat(self, request: Request) -> Response:
        t0 = time.perf_counter()
        if not self._authorized(request):
            self.metrics.finish("unauthorized", t0)
            return _error(401, "invalid or missing API key", "authentication_error")
        try:
            chat = parse_chat(json.loads(await request.body()), self.opts)
        except LookupError as exc:
            self.metrics.finish("bad_request", t0)
            return _error(404, str(exc), "model_not_found")
        except ValueError as exc:  # includes JSONDecodeError
            self.metrics.finish("bad_request", t0)
            return _error(400, f"bad request: {exc}")
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        self.metrics.received(sum(len(b) for b in chat.images))
        submit = asyncio.ensure_future(self.backend.submit(rid, chat.images, chat.prompt_tokens))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({submit, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the server is shutting down: the request goes too
            submit.cancel()
            self.metrics.finish("cancelled", t0)
            raise
        finally:
            gone.cancel()
        if not submit.done():
            submit.cancel()
            self.metrics.finish("cancelled", t0)
            return Response(status_code=499)  # nobody reads it: the client has gone
        try:
            first = submit.result()
        except BackendError as exc:
            self.metrics.finish("error", t0)
            kind = "server_error" if exc.status >= 500 else "invalid_request_error"
            return _error(exc.status, str(exc), kind)
        except Exception as exc:  # a backend bug fails the request, not the server
            self.metrics.finish("error", t0)
            return _error(500, f"backend failed: {type(exc).__name__}: {exc}", "server_error")
        self.metrics.first_token(first, t0)
        prompt = first.prompt_tokens if first.prompt_tokens is not None else chat.prompt_tokens
        stream = _Stream(rid, self.opts, chat, prompt, first.stream_fault)
        headers = {"X-Request-Id": rid, REQUEST_HEADER: _report_header(first)}
        if not chat.stream:
            text = "".join([tok async for tok in stream.tokens()])
            self.metrics.finish("ok", t0, chat.max_tokens, prompt)
            return JSONResponse(stream.completion(text), headers=headers)
        return StreamingResponse(
            stream.events(lambda n: self.metrics.finish("ok" if n else "error", t0, n, prompt)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", **headers},
        )


def _report_header(first: FirstToken) -> str:
    """The backend's stage times and per-request report as one ASCII JSON header value."""
    return json.dumps({"stages_s": dict(first.stages_s), **first.report}, ensure_ascii=True)


class _Stream:
    """The OpenAI chunks of one response."""

    def __init__(
        self, rid: str, opts: ServerOptions, chat: _Chat, prompt: int, fault: str | None
    ) -> None:
        self.rid, self.opts, self.chat, self.prompt, self.fault = rid, opts, chat, prompt, fault
        self.created = int(time.time())

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return self._event({"choices": [choice]})

    def _event(self, extra: dict[str, Any]) -> str:
        obj = {"id": self.rid, "object": "chat.completion.chunk", "created": self.created}
        return f"data: {json.dumps({**obj, 'model': self.opts.model, **extra})}\n\n"

    async def tokens(self) -> AsyncIterator[str]:
        for i in range(self.chat.max_tokens):
            if i:
                await asyncio.sleep(self.opts.decode_interval_s)
            yield f" t{i}"

    def usage(self, completion: int) -> dict[str, int]:
        total = self.prompt + completion
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": completion,
            "total_tokens": total,
        }

    async def events(self, done: Callable[[int], None]) -> AsyncIterator[str]:
        """SSE events; ``done(tokens_sent)`` runs once the stream has ended."""
        sent = 0
        try:
            yield self._chunk({"role": "assistant", "content": ""})
            if self.fault == "malformed":
                yield 'data: {"id": "' + self.rid + '", "choices": [{"delta": {"content": \n\n'
            elif self.fault == "reset":
                raise ConnectionResetError("injected fault: connection reset before a token")
            elif self.fault != "no_token":
                async for tok in self.tokens():
                    yield self._chunk({"content": tok})
                    sent += 1
            yield self._chunk({}, "length" if sent else "stop")
            if self.chat.include_usage:
                yield self._event({"choices": [], "usage": self.usage(sent)})
            yield "data: [DONE]\n\n"
        finally:
            done(sent)

    def completion(self, text: str) -> dict[str, Any]:
        message = {"role": "assistant", "content": text}
        return {
            "id": self.rid,
            "object": "chat.completion",
            "created": self.created,
            "model": self.opts.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
            "usage": self.usage(self.chat.max_tokens),
        }


def create_app(
    backend: Backend, opts: ServerOptions | None = None, metrics: ServerMetrics | None = None
) -> Starlette:
    """The app; ``backend.start()``/``close()`` run at server start-up/shutdown."""
    handler = _Handler(backend, opts or ServerOptions(), metrics or ServerMetrics())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await backend.start()
        handler.ready = True
        try:
            yield
        finally:
            handler.ready = False
            await backend.close()

    routes = [
        Route("/v1/chat/completions", handler.chat, methods=["POST"]),
        Route("/v1/models", handler.models, methods=["GET"]),
        Route("/health", handler.health, methods=["GET"]),
        Route("/version", handler.version, methods=["GET"]),
        Route("/metrics", handler.metrics_text, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.metrics = handler.metrics
    return app
