"""An async OpenAI-compatible streaming client: one :class:`Trace` to one endpoint
(``POST {base}/v1/chat/completions`` with ``stream: true``), one :class:`RequestRecord`
per request. HTTP is httpx, server-sent events are parsed by httpx-sse.

TTFT is the time from sending a request to the first chunk that carries generated text
(``delta.content`` or ``delta.reasoning_content``); a role-only opening chunk is not a
token. When no chunk carries text but the server reports ``usage.completion_tokens >= 1``
(a token that decodes to empty text), the chunk with the ``finish_reason`` counts as the
first token. Inter-token latencies are between text-bearing chunks (a server that sends
several tokens per chunk yields fewer, longer gaps)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from kimi_bench.limits import SIGINT_REASON, interrupt_reason
from kimi_bench.serving.backend import REQUEST_HEADER
from kimi_bench.serving.records import ArmResult, RequestRecord, ServerInfo
from kimi_bench.serving.trace import Trace, chat_body

CHAT_PATH = "/v1/chat/completions"
EXCERPT = 200  # characters of an error body kept in a record
INTERRUPTED = SIGINT_REASON  # ArmResult.error after Ctrl-C (SIGTERM: limits.SIGTERM_REASON)

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
        if self.dead_after < 1 or self.warmup_requests < 0:
            raise ValueError("dead_after must be >= 1 and warmup_requests >= 0")


class _Fail(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _EndpointDead(Exception):
    pass


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."


def auth_headers(api_key_env: str) -> dict[str, str]:
    key = os.environ.get(api_key_env)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _redact(text: str, api_key_env: str) -> str:
    key = os.environ.get(api_key_env)
    return text.replace(key, "<redacted>") if key else text


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

    def finish(self, rec: RequestRecord, t0: float) -> None:
        rec.prompt_tokens = self.prompt_tokens
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
    client: httpx.AsyncClient, body: bytes, rec: RequestRecord, stream: _Stream
) -> None:
    headers = {"Content-Type": "application/json"}
    async with aconnect_sse(client, "POST", CHAT_PATH, content=body, headers=headers) as src:
        rec.status = src.response.status_code
        if rec.status >= 400:
            text = (await src.response.aread()).decode("utf-8", "replace")
            phrase = src.response.reason_phrase
            raise _Fail("http", f"HTTP {rec.status} {phrase}: {_excerpt(text)}".rstrip(": "))
        rec.server = _server_report(src.response.headers.get(REQUEST_HEADER))
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
            raise _Fail("read", f"connection broke {got}: {type(exc).__name__}: {exc}") from None


async def _request(
    client: httpx.AsyncClient, body: bytes, rec: RequestRecord, t0: float, opts: ClientOptions
) -> None:
    """Send one request and fill ``rec``; every failure becomes ``rec.error_kind``."""
    stream = _Stream()
    rec.sent_s = time.perf_counter() - t0
    try:
        async with asyncio.timeout(opts.request_timeout_s):
            await _stream_one(client, body, rec, stream)
        stream.finish(rec, t0)
    except _Fail as f:
        rec.fail(f.kind, str(f))
    except TimeoutError:
        got = f"{len(stream.stamps)} token chunk(s) received"
        rec.fail("timeout", f"no complete response within {opts.request_timeout_s:g} s ({got})")
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        rec.fail("connect", f"cannot connect to {client.base_url}: {exc or type(exc).__name__}")
    except httpx.TransportError as exc:
        rec.fail("read", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # a bad request fails alone; the trace goes on
        rec.fail("client_error", f"{type(exc).__name__}: {exc}")
    rec.done_s = time.perf_counter() - t0
    if rec.error:
        rec.error = _redact(rec.error, opts.api_key_env)


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


def parse_endpoint(text: str) -> tuple[str, str]:
    """``NAME=URL`` (``--endpoint``) -> (name, base URL without a trailing slash); the URL
    is http(s) with a host. ValueError says what is wrong."""
    name, sep, url = text.partition("=")
    name, url = name.strip(), url.strip().rstrip("/")
    if not sep or not name or not url:
        raise ValueError(f"--endpoint takes NAME=URL, got {text!r}")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"--endpoint {name}: bad URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"--endpoint {name}: the URL must be http(s)://HOST[:PORT], got {url!r}")
    if parsed.path.rstrip("/").endswith(CHAT_PATH.rstrip("/")) or parsed.path.endswith("/v1"):
        raise ValueError(f"--endpoint {name}: give the server's base URL, without /v1/...")
    return name, url


def _scalars(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {}
    return {k: v for k, v in entry.items() if isinstance(v, (str, int, float, bool))}


def probe_server(
    base_url: str, *, api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 10.0
) -> ServerInfo:
    """Read ``/v1/models`` and a server version; never raises for an unreachable or odd
    server (``error`` says what went wrong)."""
    info = ServerInfo(base_url=base_url.rstrip("/"))
    with httpx.Client(
        base_url=info.base_url,
        headers=auth_headers(api_key_env),
        timeout=timeout_s,
        trust_env=False,
    ) as client:
        try:
            r = client.get("/v1/models")
        except httpx.HTTPError as exc:
            info.error = _redact(f"cannot reach {info.base_url}: {exc}", api_key_env)
            return info
        info.server_header = r.headers.get("server")
        if r.status_code >= 400:
            info.error = f"/v1/models answered HTTP {r.status_code}: {_excerpt(r.text)}"
            info.error = _redact(info.error, api_key_env)
        else:
            try:
                data = r.json().get("data", [])
                info.models = [_scalars(m) for m in data] if isinstance(data, list) else []
            except (ValueError, AttributeError):
                info.error = f"/v1/models did not answer JSON: {_excerpt(r.text)}"
        for path in ("/version", "/get_server_info"):
            try:
                v = client.get(path)
                version = v.json().get("version") if v.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError):
                continue
            if version:
                info.version, info.version_source = str(version), f"GET {path}"
                return info
        if info.server_header and "/" in info.server_header:
            info.version, info.version_source = info.server_header, "Server header"
    return info
