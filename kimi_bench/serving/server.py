"""An OpenAI-compatible streaming server (Starlette) over a pluggable :class:`Backend`.

Routes: ``POST /v1/chat/completions`` (streaming or not), ``GET /v1/models``,
``GET /health``, ``GET /version``, ``GET /metrics`` (Prometheus text). Images arrive as
base64 data URLs or as http URLs on loopback (``image_urls``: fetched, as a real server
fetches them, inside the request's TTFT); the server reads the body into a chat
(``admission``), decodes the base64 only, checks every image's size from its header
against the pixel limits (``intake``), and hands the encoded
file bytes (JPEG/PNG) to the backend, which decodes them as a real server's processor does. The
first token is sent when ``Backend.submit`` returns; later tokens (``max_tokens > 1``)
follow every ``ServerOptions.decode_interval_s`` (``sse``). The model names it answers
to are ``ServerOptions.served_names`` (``models``); ``usage`` is emulated (``usage``).

A server meant to be left running: bodies over ``max_body_bytes`` get 413, images over
the pixel limits 400 (each refusal is one warning line on the console); a client that
goes away is counted as ``disconnected`` and logs nothing; when the server begins to
stop (``begin_shutdown``, called by ``launch``'s uvicorn server on SIGTERM/SIGINT),
requests waiting for their first token get 503 and open streams end with an error event,
so shutdown never waits on them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from kimi_bench.serving.admission import Chat, ServerOptions, admit
from kimi_bench.serving.backend import REQUEST_HEADER, Backend, BackendError, FirstToken
from kimi_bench.serving.intake import Refused, read_body
from kimi_bench.serving.models import ServedModels
from kimi_bench.serving.server_metrics import ServerMetrics
from kimi_bench.serving.sse import STOPPING, ChatStream, ServerStopping, SSEResponse
from kimi_bench.serving.usage import (
    USAGE_HEADER,
    USAGE_HEADER_VALUE,
    PromptCount,
)

# a child of uvicorn's logger: the same console, format and level as uvicorn's own lines
LOG = logging.getLogger("uvicorn.error.kimi_bench")


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return Refused(status, "", message, kind=kind).response()


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body is already read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _retrieve(task: asyncio.Future[Any]) -> None:
    """A done callback: a cancelled submit's late exception is not 'never retrieved'."""
    if not task.cancelled():
        task.exception()


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "a client"


class _Handler:
    def __init__(self, backend: Backend, opts: ServerOptions, metrics: ServerMetrics) -> None:
        self.backend, self.opts, self.metrics = backend, opts, metrics
        self.served = ServedModels(opts.served_names, opts.accept_any_model)
        self.ready = self.stopping = False
        self.stop = asyncio.Event()  # set when the server begins to stop

    def begin_shutdown(self) -> None:
        """The server stops (call on its event loop): /health says so, requests waiting
        for their first token get 503, open streams end."""
        self.ready, self.stopping = False, True
        self.stop.set()

    def _authorized(self, request: Request) -> bool:
        if self.opts.api_key is None:
            return True
        return request.headers.get("authorization") == f"Bearer {self.opts.api_key}"

    async def health(self, request: Request) -> Response:
        if self.ready:
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "stopping" if self.stopping else "starting"}, 503)

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": self.opts.version})

    async def models(self, request: Request) -> Response:
        if not self._authorized(request):
            return _error(401, "invalid or missing API key", "authentication_error")
        return JSONResponse({"object": "list", "data": self.served.cards()})

    async def flush_cache(self, request: Request) -> Response:
        """SGLang's ``/flush_cache``: the backend's preprocess caches are emptied before
        the next request (serve-ab calls it before each measured trace)."""
        if not self._authorized(request):
            return _error(401, "invalid or missing API key", "authentication_error")
        flush = getattr(self.backend, "flush_cache", None)
        cached = bool(flush()) if callable(flush) else False
        return JSONResponse({"flushed": True, "preprocess_cache": cached})

    async def metrics_text(self, request: Request) -> Response:
        body, content_type = self.metrics.exposition()
        return Response(body, media_type=content_type)

    def _refuse(self, request: Request, exc: Refused) -> Response:
        self.metrics.refuse(exc.reason, "unauthorized" if exc.status == 401 else "bad_request")
        LOG.warning("refused a request from %s (HTTP %d): %s", _client(request), exc.status, exc)
        return exc.response()

    async def chat(self, request: Request) -> Response:
        t0 = time.perf_counter()
        try:
            if not self._authorized(request):
                raise Refused(
                    401, "unauthorized", "invalid or missing API key", kind="authentication_error"
                )
            raw = await read_body(request, self.opts.max_body_bytes)
            chat, unknown = await asyncio.to_thread(admit, raw, self.opts, self.served)
        except Refused as exc:
            return self._refuse(request, exc)
        except ClientDisconnect:  # gone while sending its body: nobody reads an answer
            self.metrics.finish("disconnected", t0, admitted=False)
            return Response(status_code=499)
        if unknown is not None:
            LOG.warning(
                "serving model %r as %r (--accept-any-model; first request from %s)",
                unknown,
                self.served.name,
                _client(request),
            )
        return await self._run(request, chat, t0)

    async def _first_token(
        self, request: Request, rid: str, chat: Chat, t0: float
    ) -> FirstToken | Response:
        """The backend's first token, or the response that ends the request instead: the
        client left (499, nobody reads it), the server stops (503), the backend failed."""
        submit = asyncio.ensure_future(
            self.backend.submit(rid, chat.images, chat.prompt_tokens, chat.max_tokens)
        )
        submit.add_done_callback(_retrieve)
        gone = asyncio.ensure_future(_disconnected(request))
        stop = asyncio.ensure_future(self.stop.wait())
        try:
            done, _ = await asyncio.wait({submit, gone, stop}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # uvicorn cancels what outlives its graceful timeout
            submit.cancel()
            self.metrics.finish("cancelled", t0)
            raise
        finally:
            gone.cancel()
            stop.cancel()
        if submit not in done:
            submit.cancel()
            if gone in done:
                self.metrics.finish("disconnected", t0)
                return Response(status_code=499)
            self.metrics.finish("cancelled", t0)
            return _error(503, STOPPING, "server_error")
        try:
            return submit.result()
        except BackendError as exc:
            self.metrics.finish("error", t0)
            kind = "server_error" if exc.status >= 500 else "invalid_request_error"
            return _error(exc.status, str(exc), kind)
        except Exception as exc:  # a backend bug fails the request, not the server
            self.metrics.finish("error", t0)
            return _error(500, f"backend failed: {type(exc).__name__}: {exc}", "server_error")

    async def _run(self, request: Request, chat: Chat, t0: float) -> Response:
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        self.metrics.received(sum(len(b) for b in chat.images))
        first = await self._first_token(request, rid, chat, t0)
        if isinstance(first, Response):
            return first
        self.metrics.first_token(first, t0)
        prompt = _prompt(first, chat.prompt_tokens)
        stream = ChatStream(
            rid,
            self.served.name,
            chat.max_tokens,
            prompt,
            decode_interval_s=self.opts.decode_interval_s,
            stop=self.stop,
            include_usage=chat.include_usage,
            hooks=first.hooks,
            next_token=first.next_token,
        )
        headers = {
            "X-Request-Id": rid,
            REQUEST_HEADER: _report_header(first),
            USAGE_HEADER: USAGE_HEADER_VALUE,
        }
        if chat.stream:
            return SSEResponse(
                stream, lambda how, n: self.metrics.finish(how, t0, n, prompt.total), headers
            )
        try:
            text = await stream.text()
        except ServerStopping:
            self.metrics.finish("cancelled", t0)
            return _error(503, STOPPING, "server_error")
        self.metrics.finish("ok", t0, chat.max_tokens, prompt.total)
        return JSONResponse(stream.completion(text), headers=headers)


def _prompt(first: FirstToken, text_tokens: int) -> PromptCount:
    """The prompt's emulated tokens: the backend's image tokens and, unless the backend
    reports the whole prompt, the text tokens the server counted."""
    image = first.image_tokens or 0
    if first.prompt_tokens is not None:
        return PromptCount(text=max(0, first.prompt_tokens - image), image=image)
    return PromptCount(text=text_tokens, image=image)


def _report_header(first: FirstToken) -> str:
    """The backend's stage times and per-request report as one ASCII JSON header value."""
    return json.dumps({"stages_s": dict(first.stages_s), **first.report}, ensure_ascii=True)


class _QuietWhenStopping:
    """ASGI middleware: a request that uvicorn cancels at shutdown (it outlived the
    graceful timeout, e.g. a client still sending its body) ends without the
    ``CancelledError`` traceback uvicorn would log for it."""

    def __init__(self, app: ASGIApp, handler: _Handler) -> None:
        self.app, self.handler = app, handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except asyncio.CancelledError:
            if not self.handler.stopping:
                raise


def create_app(
    backend: Backend, opts: ServerOptions, metrics: ServerMetrics | None = None
) -> Starlette:
    """The app; ``backend.start()``/``close()`` run at server start-up/shutdown.
    ``app.state.begin_shutdown()`` (on the event loop) starts the stop: ``launch`` calls
    it when uvicorn begins to shut down, before it waits for open connections."""
    handler = _Handler(backend, opts, metrics or ServerMetrics())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await backend.start()
        handler.ready = True
        try:
            yield
        finally:
            handler.begin_shutdown()
            await backend.close()

    routes = [
        Route("/v1/chat/completions", handler.chat, methods=["POST"]),
        Route("/v1/models", handler.models, methods=["GET"]),
        Route("/health", handler.health, methods=["GET"]),
        Route("/version", handler.version, methods=["GET"]),
        Route("/metrics", handler.metrics_text, methods=["GET"]),
        Route("/flush_cache", handler.flush_cache, methods=["GET", "POST"]),
    ]
    middleware = [Middleware(_QuietWhenStopping, handler=handler)]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
    app.state.metrics = handler.metrics
    app.state.begin_shutdown = handler.begin_shutdown
    return app
