"""An async OpenAI-compatible streaming client: one :class:`Trace` to one endpoint
(``POST {base}/v1/chat/completions`` with ``stream: true``), one :class:`RequestRecord`
per request. HTTP/1.1 and server-sent events are :mod:`kimi_bench.serving.wire`.

TTFT is the time from sending a request to the first chunk that carries generated text
(``delta.content``, ``delta.reasoning_content`` or ``delta.reasoning``, as
sglang.bench_serving reads them); a role-only opening chunk is not a token, but its time is
kept (``first_chunk_s``: where vllm bench serve's chat client ends TTFT). When no chunk
carries text but the server reports ``usage.completion_tokens >= 1`` (a token that decodes
to empty text), the chunk with the ``finish_reason`` counts as the first token.
Inter-token latencies are between text-bearing chunks (a server that sends several tokens
per chunk yields fewer, longer gaps).

A request succeeds only when its stream *finished*: a chunk with a ``finish_reason`` or the
``data: [DONE]`` line arrived. A stream that ends or breaks after tokens without either is
failed with kind ``truncated``. ``request_timeout_s`` is one deadline from the send to the
end of the stream: it covers connecting, the response headers (first byte), the first token
and every later chunk; the error text says which point the server stalled at.

HTTP 429: counted as a failure like any 4xx/5xx (as ``vllm bench serve`` does) unless
``retry_429`` > 0: then the request is sent again up to that many times, after the
``Retry-After`` seconds the server asked for (1 s when absent or unreadable, at most
``RETRY_AFTER_MAX_S``), all within the same request deadline; TTFT still counts from the
first send, so waiting is part of the measured latency.

Before offset 0 every request is prebuilt (the trace's images are base64-encoded once, each
distinct body is JSON-encoded once, each request is its HTTP bytes, head and body) and one
keep-alive connection per request that can be in flight is opened, so a send only writes
bytes (``serving.wire``: httpx costs milliseconds of loop time per request). Sends are
scheduled on ``time.perf_counter`` (monotonic); each record keeps its scheduled time and
its lateness (actual send minus scheduled, less any concurrency wait). The garbage
collector is paused during the trace: a collection in a burst lands in some request's TTFT."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from kimi_bench.infra.limits import SIGINT_REASON, interrupt_reason
from kimi_bench.serving.endpoints import (  # re-exported: callers import them from here
    auth_headers,
    parse_endpoint,
    probe_server,
)
from kimi_bench.serving.eos import ignore_eos_fields
from kimi_bench.serving.records import ArmResult, RequestRecord
from kimi_bench.serving.request import RETRY_AFTER_MAX_S, ClientOptions, Target, send_request
from kimi_bench.serving.trace import Trace, chat_body

INTERRUPTED = SIGINT_REASON  # ArmResult.error after Ctrl-C (SIGTERM: limits.SIGTERM_REASON)
MAX_PREOPEN = 256  # connections opened before the trace, at most

Progress = Callable[[RequestRecord, int, int], None]  # (record, done so far, planned)
# awaited with the request index after its scheduled time, before its send: a seam for
# tests that need late sends (None in real runs)
BeforeSend = Callable[[int], Awaitable[None]]

__all__ = ["RETRY_AFTER_MAX_S", "ClientOptions", "auth_headers", "drive", "parse_endpoint",
           "probe_server", "run_trace"]  # fmt: skip


class _EndpointDead(Exception):
    pass


def request_bodies(trace: Trace, opts: ClientOptions) -> list[bytes]:
    """The JSON body of every request, encoded once per distinct request (images, prompt,
    max tokens: requests with the same share one bytes object)."""
    by_keys: dict[tuple[Any, ...], bytes] = {}
    out = []
    for i, keys in enumerate(trace.image_keys):
        key = (keys, trace.request_prompt(i), trace.request_max_tokens(i))
        if key not in by_keys:
            limit = trace.request_max_tokens(i) or opts.max_tokens
            eos = ignore_eos_fields(opts.ignore_eos_as, limit) if opts.ignore_eos_as else {}
            body = chat_body(trace, i, opts.model, opts.max_tokens,
                             include_usage=opts.include_usage,
                             extra={**opts.extra_body, **eos})  # fmt: skip
            by_keys[key] = json.dumps(body).encode()
        out.append(by_keys[key])
    return out


class _Run:
    """Shared state of one arm: the prebuilt requests, the concurrency gate and the
    dead-endpoint count."""

    def __init__(
        self,
        trace: Trace,
        opts: ClientOptions,
        result: ArmResult,
        target: Target,
        before_send: BeforeSend | None = None,
    ) -> None:
        self.trace, self.opts, self.result = trace, opts, result
        self.before_send = before_send
        self.gate: Any = (
            asyncio.Semaphore(opts.max_concurrency)
            if opts.max_concurrency
            else contextlib.nullcontext()
        )
        self.target = target
        self.requests = target.requests
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
        i: int,
        t0: float,
        out: list[RequestRecord],
        progress: Progress | None,
        warm: bool = False,
    ) -> None:
        rec = RequestRecord(rid=i, scheduled_s=0.0 if warm else self.trace.arrivals[i], warmup=warm)
        try:
            if self.before_send is not None and not warm:
                await self.before_send(i)
            woke = time.perf_counter()
            async with self.gate:
                rec.gate_wait_s = time.perf_counter() - woke
                await send_request(self.target, self.requests[i], rec, t0, self.opts)
        except asyncio.CancelledError:
            rec.fail("cancelled", self.dead or "interrupted before the response ended")
            rec.done_s = time.perf_counter() - t0
            raise
        finally:
            out.append(rec)
            if progress and not warm:
                progress(rec, len(out), self.result.planned)
        self.note(rec)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


async def _drive(
    base_url: str,
    trace: Trace,
    opts: ClientOptions,
    result: ArmResult,
    progress: Progress | None,
    before_trace: Callable[[], None] | None = None,
    before_send: BeforeSend | None = None,
) -> None:
    bodies = request_bodies(trace, opts)
    target = Target(base_url, opts, bodies)
    run = _Run(trace, opts, result, target, before_send)
    try:
        w0 = time.perf_counter()
        for i in range(min(opts.warmup_requests, len(trace))):
            await run.one(i, w0, result.warmup, None, warm=True)
        # one open connection per request that can be in flight: a burst does not pay
        # its TCP connects inside its TTFTs (a long-running client's connections are open)
        await target.pool.preopen(min(len(trace), opts.max_concurrency or len(trace), MAX_PREOPEN))
        if before_trace is not None:  # e.g. a /metrics scrape: nothing is in flight now
            await asyncio.to_thread(before_trace)
        with _gc_paused():
            await _send_trace(run, result, progress)
    except* _EndpointDead as group:
        result.error = str(group.exceptions[0])
    finally:
        await target.pool.aclose()
    result.records.sort(key=lambda r: r.rid)


async def _send_trace(run: _Run, result: ArmResult, progress: Progress | None) -> None:
    """Each request at its offset from t0 (perf_counter, monotonic)."""
    t0 = result.trace_start = time.perf_counter()
    async with asyncio.TaskGroup() as tasks:
        for i, offset in enumerate(run.trace.arrivals):
            while (delay := t0 + offset - time.perf_counter()) > 0:  # never early
                await asyncio.sleep(delay)
            tasks.create_task(run.one(i, t0, result.records, progress))


async def run_trace(
    base_url: str, trace: Trace, opts: ClientOptions, progress: Progress | None = None
) -> ArmResult:
    """Send every request of ``trace`` at its arrival offset; return one record per request
    sent. A dead endpoint (``opts.dead_after`` consecutive connection failures) ends the
    arm: ``result.error`` says so, in-flight requests are recorded as cancelled and the
    rest as unsent. ``progress(record, done, planned)`` runs after each request."""
    result = ArmResult(base_url=base_url.rstrip("/"), planned=len(trace))
    await _drive(result.base_url, trace, opts, result, progress)
    return result


def drive(
    base_url: str,
    trace: Trace,
    opts: ClientOptions,
    progress: Progress | None = None,
    before_trace: Callable[[], None] | None = None,
    before_send: BeforeSend | None = None,
) -> ArmResult:
    """:func:`run_trace` from synchronous code. Ctrl-C ends the arm like a dead endpoint:
    the records so far are returned and ``error`` says it was interrupted.
    ``before_trace()`` runs (in a thread) after the warm-up requests, before offset 0;
    ``before_send(i)`` is awaited before each measured send (a test seam)."""
    result = ArmResult(base_url=base_url.rstrip("/"), planned=len(trace))
    try:
        asyncio.run(
            _drive(result.base_url, trace, opts, result, progress, before_trace, before_send)
        )
    except KeyboardInterrupt as exc:
        result.error = interrupt_reason(exc)
        result.records.sort(key=lambda r: r.rid)
    return result
