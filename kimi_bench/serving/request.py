"""One streamed request of the client (:mod:`kimi_bench.serving.client`): its options, the
send (with 429 retries), the event stream read into a :class:`RequestRecord`, and the
failure kinds (``records.ERROR_KINDS``).

HTTP is :mod:`kimi_bench.serving.wire` (prebuilt request bytes on asyncio streams). The
record's ``wire_sent_s`` is when the request's bytes were handed to a connection, after
taking it from the pool (or connecting); a send's lateness counts that, not only when the
task woke."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from kimi_bench.infra.jsonio import InputError, parse_json
from kimi_bench.options import CLIENT_CONNECT_TIMEOUT_S, CLIENT_DEAD_AFTER
from kimi_bench.serving.backend import REQUEST_HEADER
from kimi_bench.serving.endpoints import CHAT_PATH, _excerpt, _redact, auth_headers
from kimi_bench.serving.records import RequestRecord, ServerReport
from kimi_bench.serving.wire import (
    ConnectFailed,
    Connection,
    Origin,
    Pool,
    Response,
    WireError,
    request_bytes,
    sse_events,
)

RETRY_AFTER_MAX_S = 30.0
# the delta fields that carry generated text (sglang.bench_serving reads the same three;
# vLLM's reasoning parsers stream ``reasoning``, older ones ``reasoning_content``)
TEXT_FIELDS = ("content", "reasoning_content", "reasoning")
_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream",
            "Cache-Control": "no-store"}  # fmt: skip


class ClientSettings(Protocol):
    """What the client takes from a command's options (``ServeOptions`` and serve-ab's
    ``HttpServeOptions`` both have it)."""

    @property
    def max_tokens(self) -> int: ...
    @property
    def api_key_env(self) -> str: ...
    @property
    def max_concurrency(self) -> int | None: ...
    @property
    def request_timeout_s(self) -> float: ...
    @property
    def warmup_requests(self) -> int: ...
    @property
    def retry_429(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """How the client sends one arm's requests. Built from the command's options
    (:meth:`from_options`); it holds no defaults of its own (issue 20: one configuration
    path). Library users start from ``from_options(ServeOptions(), model)`` and
    ``dataclasses.replace`` what they need."""

    model: str
    max_tokens: int
    api_key_env: str  # the variable's *name*; its value is never stored
    max_concurrency: int | None  # in-flight cap; None = no cap
    request_timeout_s: float  # whole request, send to end of stream
    connect_timeout_s: float
    dead_after: int  # consecutive connection failures that end the arm
    warmup_requests: int  # sent one at a time before the trace, kept apart
    include_usage: bool  # ask for stream_options.include_usage
    retry_429: int  # resend a request answered 429 up to this many times
    extra_body: Mapping[str, Any]  # --extra-body, merged into every request body
    # --ignore-eos as the server spells it (serving.eos: the field, or transformers serve's
    # min_new_tokens equal to each request's own max tokens); None: not asked
    ignore_eos_as: str | None
    headers: Mapping[str, str]  # --header K:V, on every request

    @classmethod
    def from_options(cls, opts: ClientSettings, model: str) -> ClientOptions:
        return cls(
            model=model,
            max_tokens=opts.max_tokens,
            api_key_env=opts.api_key_env,
            max_concurrency=opts.max_concurrency,
            request_timeout_s=opts.request_timeout_s,
            connect_timeout_s=CLIENT_CONNECT_TIMEOUT_S,
            dead_after=CLIENT_DEAD_AFTER,
            warmup_requests=opts.warmup_requests,
            include_usage=True,
            retry_429=opts.retry_429,
            extra_body={},
            ignore_eos_as=None,
            headers={},
        )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """The checks a library caller's ``replace`` can break (the options model makes
        them for the CLI); made when the options are made, ``replace`` included."""
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


@dataclass
class _Stream:
    """What one event stream has shown so far."""

    stamps: list[float] = field(default_factory=list)  # perf_counter of text chunks
    first_chunk: float | None = None  # the first chunk with choices, text or not
    finish_at: float | None = None
    finish_reason: str | None = None
    usage_tokens: int | None = None
    prompt_tokens: int | None = None
    prompt_image_tokens: int | None = None
    done: bool = False

    def take(self, data: str, now: float) -> None:
        try:
            obj = parse_json(data, "event data", constants=True)
        except InputError:
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
            details = usage.get("prompt_tokens_details")
            image = details.get("image_tokens") if isinstance(details, dict) else None
            if isinstance(image, int) and not isinstance(image, bool):
                self.prompt_image_tokens = image
        if choices and self.first_chunk is None:
            self.first_chunk = now
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict) and any(delta.get(k) for k in TEXT_FIELDS):
                self.stamps.append(now)
                break
        for choice in choices:
            if isinstance(choice, dict) and choice.get("finish_reason") and not self.finish_at:
                self.finish_at, self.finish_reason = now, str(choice["finish_reason"])

    def record(self, rec: RequestRecord) -> None:
        """What the stream showed, success or not."""
        rec.prompt_tokens, rec.prompt_image_tokens = self.prompt_tokens, self.prompt_image_tokens
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
        if self.first_chunk is not None:
            rec.first_chunk_s = self.first_chunk - t0


def _server_report(value: str | None) -> ServerReport | None:
    """The emulator's per-request header as a dict; None when absent or unreadable (it is
    extra information: a bad one never fails the request)."""
    if not value:
        return None
    try:
        obj = parse_json(value, "server report header", constants=True)
    except InputError:
        return None
    return cast(ServerReport, obj) if isinstance(obj, dict) else None  # checked where read


class Target:
    """One endpoint as the sends see it: its connection pool and the request bytes (one
    per body of ``bodies``, head and body, built before the run: a send only writes it;
    requests with the same body share its bytes)."""

    def __init__(self, base_url: str, opts: ClientOptions, bodies: Sequence[bytes] = ()) -> None:
        self.base_url = base_url
        self.headers = {**_HEADERS, **auth_headers(opts.api_key_env), **opts.headers}
        self.origin = Origin.from_url(base_url)
        self.pool = Pool(self.origin, opts.connect_timeout_s)
        built: dict[int, bytes] = {}
        self.requests = [
            built.setdefault(id(b), request_bytes(self.origin, "POST", CHAT_PATH, b, self.headers))
            for b in bodies
        ]


async def _exchange(
    target: Target, data: bytes, rec: RequestRecord, t0: float
) -> tuple[Connection, Response]:
    """Write the request, read the response head. A pooled connection the server has
    closed meanwhile is replaced by a new one once (the request never reached it). The
    first write's time is the record's ``wire_sent_s``."""
    conn = await target.pool.acquire()
    if rec.wire_sent_s is None:  # after any connect, as the bytes go out
        rec.wire_sent_s = time.perf_counter() - t0
    try:
        await conn.send(data)
        return conn, await conn.response()
    except WireError:
        conn.close()
        if not conn.pooled:
            raise
    except BaseException:
        conn.close()
        raise
    conn = await target.pool.acquire(fresh=True)
    try:
        await conn.send(data)
        return conn, await conn.response()
    except BaseException:
        conn.close()
        raise


async def _stream_one(
    target: Target, data: bytes, rec: RequestRecord, stream: _Stream, t0: float
) -> None:
    conn, response = await _exchange(target, data, rec, t0)
    rec.first_byte_s = time.perf_counter() - t0
    rec.status = response.status
    try:
        if rec.status >= 400:
            text = (await response.read()).decode("utf-8", "replace")
            msg = f"HTTP {rec.status} {response.reason}: {_excerpt(text)}".rstrip(": ")
            wait = _retry_after(response.headers.get("retry-after"))
            raise _Fail("http", msg, wait if rec.status == 429 else None)
        rec.server = _server_report(response.headers.get(REQUEST_HEADER.lower()))
        await _read_events(response, stream)
    finally:
        rec.bytes_received += response.received
        target.pool.release(conn, response)


async def _read_events(response: Response, stream: _Stream) -> None:
    ctype = response.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        raise _Fail("malformed", f"response is not an event stream (Content-Type {ctype!r})")
    try:
        events = sse_events(response.chunks(), time.perf_counter)
        async with contextlib.aclosing(events):
            async for name, data, now in events:
                if data.strip() == "[DONE]":
                    stream.done = True
                    break
                if data and name in ("", "message"):  # skip keep-alive events
                    stream.take(data, now)
    except WireError as exc:
        got = f"after {len(stream.stamps)} token chunk(s)"
        kind = "truncated" if stream.stamps and not stream.finished else "read"
        raise _Fail(kind, f"connection broke {got}: {exc}") from None


async def send_request(
    target: Target, data: bytes, rec: RequestRecord, t0: float, opts: ClientOptions
) -> None:
    """Send one request and fill ``rec``; every failure becomes ``rec.error_kind``."""
    stream = _Stream()
    rec.sent_s = time.perf_counter() - t0
    try:
        async with asyncio.timeout(opts.request_timeout_s):
            await _send_retrying(target, data, rec, stream, t0, opts)
        stream.finish(rec, t0)
    except _Fail as f:
        rec.fail(f.kind, str(f))
    except TimeoutError:
        rec.fail("timeout", _stalled(rec, stream, opts.request_timeout_s))
    except ConnectFailed as exc:
        rec.fail("connect", f"cannot connect to {target.base_url}: {exc}")
    except WireError as exc:
        rec.fail("read", str(exc))
    except Exception as exc:  # a bad request fails alone; the trace goes on
        rec.fail("client_error", f"{type(exc).__name__}: {exc}")
    stream.record(rec)
    rec.done_s = time.perf_counter() - t0
    if rec.error:
        rec.error = _redact(rec.error, opts.api_key_env)


async def _send_retrying(
    target: Target,
    data: bytes,
    rec: RequestRecord,
    stream: _Stream,
    t0: float,
    opts: ClientOptions,
) -> None:
    """One send, and up to ``opts.retry_429`` more after a 429 (its Retry-After first)."""
    while True:
        try:
            await _stream_one(target, data, rec, stream, t0)
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
