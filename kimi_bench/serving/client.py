"""An async OpenAI-compatible streaming client: one :class:`Trace` to one endpoint
(``POST {base}/v1/chat/completions`` with ``stream: true``), one :class:`RequestRecord`
per request. HTTP is httpx, server-sent events are parsed by httpx-sse.

TTFT is the time from sending a request to the first chunk that carries generated text
(``delta.content`` or ``delta.reasoning_content``); a role-only opening chunk is not a
token. When no chunk carries text but the server reports ``usage.completion_tokens >= 1``
(a token that decodes to empty text), the chunk with the ``finish_reason`` counts as the
first token. Inter-token latencies are between text-bearing chunks (a server that sends
several tokens per chunk yields fewer, longer gaps).

A request succeeds only when its stream *finished*: a chunk with a ``finish_reason`` or the
``data: [DONE]`` line arrived. A stream that ends or breaks after tokens without either is
failed with kind ``truncated``. ``request_timeout_s`` is one deadline from the send to the
end of the stream: it covers connecting, the response headers (first byte), the first token
and every later chunk; the error text says which point the server stalled at.

HTTP 429: counted as a failure like any 4xx/5xx (as ``vllm bench serve`` does) unless
``retry_429`` > 0: then the request is sent again up to that many times, after the
``Retry-After`` seconds the server asked for (1 s when absent or unreadable, at most
``RETRY_AFTER_MAX_S``), all within the same request deadline; TTFT still counts from the
first send, so waiting is part of the measured latency."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from kimi_bench.limits import SIGINT_REASON, interrupt_reason
from kimi_bench.serving.backend import REQUEST_HEADER
from kimi_bench.serving.endpoints import (  # re-exported: callers import them from here
    CHAT_PATH,
    _excerpt,
    _redact,
    auth_headers,
    parse_endpoint,
    probe_server,
)
from kimi_bench.serving.records import ArmResult, RequestRecord
from kimi_bench.serving.trace import Trace, chat_body

INTERRUPTED = SIGINT_REASON  # ArmResult.error after Ctrl-C (SIGTERM: limits.SIGTERM_REASON)
RETRY_AFTER_MAX_S = 30.0

Progress = Callable[[RequestRecord, int, int], None]  # (record, done so far, planned)


@dataclass(frozen=True)
class ClientOptions:
    model: str
    max_tokens: int = 1
    api_key_env: str = "OPENAI_API_KEY"  # the variable's *name*; its value is never stored
    max_concurrency: int | None = None  # in-flight cap; None = no cap
    request_timeout_s: float = 60.0  # whole request, send to end of stream
    connect_timeout_s: float = 10.0
    dead_after: int = 5  # consecutive connection failures that end the arm
    warmup_requests: int = 0  # sent one at a time before the trace, kept apart
    include_usage: bool = True  # ask for stream_options.include_usage
    retry_429: int = 0  # resend a request answered 429 up to this many times
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"ignore_eos": True}

    def validate(self) -> None:
        if not self.model:
            raise ValueError("a model name is needed (--model)")
        if self.max_tokens < 1:
            raise ValueError(f"--max-tokens must be >= 1, got {self.max_tokens}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"--max-concurrency must be >= 1, got {self.max_concurrency}")
        if self.request_timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("request and connect timeouts must be > 0")
        if self.retry_429 < 0:
            raise ValueError(f"--retry-429 must be >= 0, got {self.retry_429}")
        if self.dead_after < 1 or self.warmup_requests < 0:
            raise ValueError("dead_after must be >= 1 and warmup_requests >= 0")


__all__ = ["ClientOptions", "auth_headers", "drive", "parse_endpoint", "probe_server", "run_trace"]


class _Fail(Exception):
    def __init__(self, kind: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind, self.retry_after = kind, retry_after


def _retry_after(value: str | None) -> float:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds; an HTTP date or junk
    counts as 1 s), bounded by ``RETRY_AFTER_MAX_S``."""
    try:
        wait = float(value) if value is not None else 1.0
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.0), RETRY_AFTER_MAX_S) if wait == wait else 1.0


class _EndpointDead(Exception):
    pass


def _async_client(base_url: str, opts: ClientOptions) -> httpx.AsyncClient:
    cap = opts.max_concurrency
    return httpx.AsyncClient(
        base_url=base_url,
        headers=auth_headers(opts.api_key_env),
        timeout=httpx.Timeout(None, connect=opts.connect_timeout_s),
        limits=httpx.Limits(max_connections=cap, max_keepalive_connections=cap),
        trust_env=False,  # a benchmark talks to the endpoint directly, never via a proxy
    )


@dataclass
class _Stream:
    """What one event stream has shown so far."""

    stamps: list[float] = field(default_factory=list)  # perf_counter of text chunks
    finish_at: float | None = None
    finish_reason: str | None = None
    usage_tokens: int | None = None
    prompt_tokens: int | None = None
    done: bool = False

    def take(self, data: str, now: float) -> None:
        try:
            obj = json.loads(data)
        except json.JSONDecodeError:
            raise _Fail("malformed", f"event data is not JSON: {_excerpt(data)!r}") from None
        if not isinstance(obj, dict):
            raise _Fail("malformed", f"event data is not a JSON object: {_excerpt(data)!r}")
        if obj.get("error"):
            err = obj["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise _Fail("server_error", f"error in stream: {_excerpt(str(msg))}")
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise _Fail("malformed", f"chunk without a choices list: {_excerpt(data)!r}")
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage_tokens = usage["completion_tokens"]
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            self.prompt_tokens = usage["prompt_tokens"]
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict) and (delta.get("content") or delta.get("reasoning_content")):
                self.stamps.append(now)
                break
        for choice in choices:
            if isinstance(choice, dict) and choice.get("finish_reason") and not self.finish_at:
                self.finish_at, self.finish_reason = now, str(choice["finish_reason"])

    def record(self, rec: RequestRecord) -> None:
        """What the stream showed, success or not."""
        rec.prompt_tokens = self.prompt_tokens
        rec.token_chunks = len(self.stamps)
        rec.finish_reason, rec.done_marker = self.finish_reason, self.done

    @property
    def finished(self) -> bool:
        return self.done or self.finish_reason is not None

    def finish(self, rec: RequestRecord, t0: float) -> None:
        if self.stamps and not self.finished:
            raise _Fail(
                "truncated",
                f"the stream ended after {len(self.stamps)} token chunk(s) without a "
                "finish_reason or [DONE]",
            )
        if self.stamps:
            first = self.stamps[0]
            rec.itl_ms = [(b - a) * 1e3 for a, b in zip(self.stamps, self.stamps[1:], strict=False)]
            rec.output_tokens = self.usage_tokens or len(self.stamps)
        elif self.finish_at is not None and (self.usage_tokens or 0) >= 1:
            first = self.finish_at
            rec.output_tokens = self.usage_tokens or 0
        else:
            how = [] if self.done else ["no [DONE]"]
            if self.finish_reason:
                how.append(f"finish_reason={self.finish_reason}")
            if self.usage_tokens is not None:
                how.append(f"usage.completion_tokens={self.usage_tokens}")
            raise _Fail(
                "no_token", "stream ended without a token" + (f" ({', '.join(how)})" if how else "")
            )
        rec.first_token_s = first - t0


def _server_report(value: str | None) -> dict[str, Any] | None:
    """The emulator's per-request header as a dict; None when absent or unreadable (it is
    extra information: a bad one never fails the request)."""
    if not value:
        return None
    try:
        obj = json.loads(value)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


async def _stream_one(
    client: httpx.AsyncClient, body: bytes, rec: RequestRecord, stream: _Stream, t0: float
) -> None:
    headers = {"Content-Type": "application/json"}
    async with aconnect_sse(client, "POST", CHAT_PATH, content=body, headers=headers) as src:
        rec.first_byte_s = time.perf_counter() - t0
        rec.status = src.response.status_code
        try:
            if rec.status >= 400:
                text = (await src.response.aread()).decode("utf-8", "replace")
                phrase = src.response.reason_phrase
                msg = f"HTTP {rec.status} {phrase}: {_excerpt(text)}".rstrip(": ")
                wait = _retry_after(src.response.headers.get("retry-after"))
                raise _Fail("http", msg, wait if rec.status == 429 else None)
            rec.server = _server_report(src.response.headers.get(REQUEST_HEADER))
            await _read_events(src, stream)
        finally:
            rec.bytes_received += src.response.num_bytes_downloaded


async def _read_events(src: Any, stream: _Stream) -> None:
    try:
        async for event in src.aiter_sse():
            if event.data.strip() == "[DONE]":
                stream.done = True
                break
            if event.data and event.event in ("", "message"):  # skip keep-alive events
                stream.take(event.data, time.perf_counter())
    except SSEError as exc:
        raise _Fail("malformed", f"response is not an event stream: {exc}") from None
    except httpx.TransportError as exc:
        got = f"after {len(stream.stamps)} token chunk(s)"
        kind = "truncated" if stream.stamps and not stream.finished else "read"
        raise _Fail(kind, f"connection broke {got}: {type(exc).__name__}: {exc}") from None


async def _request(
    client: httpx.AsyncClient, body: bytes, rec: RequestRecord, t0: float, opts: ClientOptions
) -> None:
    """Send one request and fill ``rec``; every failure becomes ``rec.error_kind``."""
    stream = _Stream()
    rec.sent_s = time.perf_counter() - t0
    try:
        async with asyncio.timeout(opts.request_timeout_s):
            await _send_retrying(client, body, rec, stream, t0, opts)
        stream.finish(rec, t0)
    except _Fail as f:
        rec.fail(f.kind, str(f))
    except TimeoutError:
        rec.fail("timeout", _stalled(rec, stream, opts.request_timeout_s))
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        rec.fail("connect", f"cannot connect to {client.base_url}: {exc or type(exc).__name__}")
    except httpx.TransportError as exc:
        rec.fail("read", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bad request fails alone; the trace goes on
        rec.fail("client_error", f"{type(exc).__name__}: {exc}")
    stream.record(rec)
    rec.done_s = time.perf_counter() - t0
    if rec.error:
        rec.error = _redact(rec.error, opts.api_key_env)


async def _send_retrying(
    client: httpx.AsyncClient,
    body: bytes,
    rec: RequestRecord,
    stream: _Stream,
    t0: float,
    opts: ClientOptions,
) -> None:
    """One send, and up to ``opts.retry_429`` more after a 429 (its Retry-After first)."""
    while True:
        try:
            await _stream_one(client, body, rec, stream, t0)
            return
        except _Fail as f:
            if f.retry_after is None or rec.retries >= opts.retry_429:
                raise
            rec.retries += 1
            await asyncio.sleep(f.retry_after)


def _stalled(rec: RequestRecord, stream: _Stream, limit_s: float) -> str:
    if rec.first_byte_s is None:
        where = "no response (not connected, or no headers)"
    elif not stream.stamps:
        where = "response headers but no token"
    else:
        where = f"the stream stalled after {len(stream.stamps)} token chunk(s)"
    return f"no complete response within {limit_s:g} s: {where}"


class _Run:
    """Shared state of one arm: the concurrency gate and the dead-endpoint count."""

    def __init__(self, trace: Trace, opts: ClientOptions, result: ArmResult) -> None:
        self.trace, self.opts, self.result = trace, opts, result
        self.gate: Any = (
            asyncio.Semaphore(opts.max_concurrency)
            if opts.max_concurrency
            else contextlib.nullcontext()
        )
        self.bodies: dict[tuple[int, ...], bytes] = {}
        for i, keys in enumerate(trace.image_keys):
            if keys not in self.bodies:
                body = chat_body(
                    trace,
                    i,
                    opts.model,
                    opts.max_tokens,
                    include_usage=opts.include_usage,
                    extra=opts.extra_body,
                )
                self.bodies[keys] = json.dumps(body).encode()
        self.refused = 0
        self.dead: str | None = None

    def note(self, rec: RequestRecord) -> None:
        if rec.error_kind == "connect":
            self.refused += 1
        elif rec.status is not None:
            self.refused = 0
        if self.refused >= self.opts.dead_after and not self.dead:
            self.dead = (
                f"endpoint {self.result.base_url} looks dead: {self.refused} consecutive "
                f"connection failures (last: {rec.error}); the arm ends here"
            )
            raise _EndpointDead(self.dead)

    async def one(
        self,
        client: httpx.AsyncClient,
        i: int,
        t0: float,
        out: list[RequestRecord],
        progress: Progress | None,
        warm: bool = False,
    ) -> None:
        rec = RequestRecord(rid=i, scheduled_s=0.0 if warm else self.trace.arrivals[i], warmup=warm)
        try:
            async with self.gate:
                await _request(client, self.bodies[self.trace.image_keys[i]], rec, t0, self.opts)
        except asyncio.CancelledError:
            rec.fail("cancelled", self.dead or "interrupted before the response ended")
            rec.done_s = time.perf_counter() - t0
            raise
        finally:
            out.append(rec)
            if progress and not warm:
                progress(rec, len(out), self.result.planned)
        self.note(rec)


async def _drive(
    base_url: str,
    trace: Trace,
    opts: ClientOptions,
    result: ArmResult,
    progress: Progress | None,
    before_trace: Callable[[], None] | None = None,
) -> None:
    run = _Run(trace, opts, result)
    async with _async_client(base_url, opts) as client:
        with contextlib.suppress(httpx.HTTPError):  # first-use costs of the client, not timed
            await client.get("/v1/models", timeout=opts.connect_timeout_s)
        try:
            w0 = time.perf_counter()
            for i in range(min(opts.warmup_requests, len(trace))):
                await run.one(client, i, w0, result.warmup, None, warm=True)
            if before_trace is not None:  # e.g. a /metrics scrape: nothing is in flight now
                await asyncio.to_thread(before_trace)
            t0 = result.trace_start = time.perf_counter()
            async with asyncio.TaskGroup() as tasks:
                for i, offset in enumerate(trace.arrivals):
                    delay = t0 + offset - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    tasks.create_task(run.one(client, i, t0, result.records, progress))
        except* _EndpointDead as group:
            result.error = str(group.exceptions[0])
    result.records.sort(key=lambda r: r.rid)


async def run_trace(
    base_url: str, trace: Trace, opts: ClientOptions, progress: Progress | None = None
) -> ArmResult:
    """Send every request of ``trace`` at its arrival offset; return one record per request
    sent. A dead endpoint (``opts.dead_after`` consecutive connection failures) ends the
    arm: ``result.error`` says so, in-flight requests are recorded as cancelled and the
    rest as unsent. ``progress(record, done, planned)`` runs after each request."""
    opts.validate()
    result = ArmResult(base_url=base_url.rstrip("/"), planned=len(trace))
    await _drive(result.base_url, trace, opts, result, progress)
    return result


def drive(
    base_url: str,
    trace: Trace,
    opts: ClientOptions,
    progress: Progress | None = None,
    before_trace: Callable[[], None] | None = None,
) -> ArmResult:
    """:func:`run_trace` from synchronous code. Ctrl-C ends the arm like a dead endpoint:
    the records so far are returned and ``error`` says it was interrupted.
    ``before_trace()`` runs (in a thread) after the warm-up requests, before offset 0."""
    opts.validate()
    result = ArmResult(base_url=base_url.rstrip("/"), planned=len(trace))
    try:
        asyncio.run(_drive(result.base_url, trace, opts, result, progress, before_trace))
    except KeyboardInterrupt as exc:
        result.error = interrupt_reason(exc)
        result.records.sort(key=lambda r: r.rid)
    return result
