"""Backends and an in-thread server for tests: :class:`SleepBackend` (decodes the images,
then waits a set time), :class:`FaultyBackend` (wraps any backend and misbehaves on chosen
requests) and :func:`serve_in_thread` (an app on a free port from a daemon thread)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import threading
import time
from collections.abc import Collection, Iterator
from typing import Any

from PIL import Image

from kimi_bench.serving.backend import Backend, BackendError, FirstToken
from kimi_bench.serving.launch import ServerStartError, _config, _Server, bind_socket
from tests.faults import STREAM_MODES, BrokenStream

FAULTS = ("http500", "stall", *STREAM_MODES)


def _decode(images: list[bytes]) -> int:
    """Decode every image fully; the decoded size in bytes. BackendError(400) names the
    first image that is not a decodable file."""
    total = 0
    for k, payload in enumerate(images):
        try:
            with Image.open(io.BytesIO(payload)) as im:
                im.load()
                total += im.width * im.height * len(im.getbands())
        except Exception as exc:
            raise BackendError(400, f"image {k} cannot be decoded: {exc}") from None
    return total


class SleepBackend:
    """Decodes the images (in a worker thread), then sleeps ``first_token_s``. Stages:
    ``decode`` and ``prefill``; bytes: encoded ``images_in`` and ``decoded`` pixels.
    ``max_in_flight`` is the most requests it held at once."""

    def __init__(self, first_token_s: float = 0.0, decode_images: bool = True) -> None:
        if first_token_s < 0:
            raise ValueError("first_token_s must be >= 0")
        self.first_token_s, self.decode_images = first_token_s, decode_images
        self.started = self.closed = False
        self.submitted = self.in_flight = self.max_in_flight = 0

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int = 1
    ) -> FirstToken:
        self.submitted += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            t0 = time.perf_counter()
            decoded = await asyncio.to_thread(_decode, images) if self.decode_images else 0
            t1 = time.perf_counter()
            await asyncio.sleep(self.first_token_s)
            return FirstToken(
                stages_s={"decode": t1 - t0, "prefill": time.perf_counter() - t1},
                stage_bytes={"images_in": sum(len(b) for b in images), "decoded": decoded},
                prompt_tokens=prompt_tokens,
            )
        finally:
            self.in_flight -= 1


class FaultyBackend:
    """Passes requests to ``inner`` except the chosen ones (0-based submit order; None =
    all), which fail as ``mode`` says: ``http500`` (BackendError 500), ``stall`` (never
    answers, until the client goes away or ``stall_s`` passes), ``no_token`` (the stream
    ends without a token), ``malformed`` (a broken SSE data line), ``reset`` (the
    connection drops before a token)."""

    def __init__(
        self,
        inner: Backend,
        mode: str,
        requests: Collection[int] | None = None,
        stall_s: float = 3600.0,
    ) -> None:
        if mode not in FAULTS:
            raise ValueError(f"fault mode must be one of {', '.join(FAULTS)}, got {mode!r}")
        self.inner, self.mode, self.stall_s = inner, mode, stall_s
        self.requests = None if requests is None else frozenset(requests)
        self.count = 0

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int = 1
    ) -> FirstToken:
        n, self.count = self.count, self.count + 1
        if self.requests is not None and n not in self.requests:
            return await self.inner.submit(request_id, images, prompt_tokens, max_tokens)
        if self.mode == "http500":
            raise BackendError(500, f"injected fault http500 on request {n}")
        if self.mode == "stall":
            await asyncio.sleep(self.stall_s)
            raise BackendError(504, f"injected stall of {self.stall_s:g} s on request {n}")
        first = await self.inner.submit(request_id, images, prompt_tokens, max_tokens)
        return dataclasses.replace(first, hooks=BrokenStream(self.mode))  # see tests/faults.py


@contextlib.contextmanager
def serve_in_thread(
    app: Any, host: str = "127.0.0.1", *, log_level: str = "warning", start_timeout_s: float = 30
) -> Iterator[str]:
    """Serve ``app`` on a free port from a daemon thread; yields the base URL, stops the
    server (shutdown runs) when the block ends."""
    sock = bind_socket(host, 0)
    port = sock.getsockname()[1]
    server = _Server(_config(app, log_level, 2.0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + start_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ServerStartError("the in-thread server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
