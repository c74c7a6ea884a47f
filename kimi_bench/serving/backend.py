"""The backend protocol the server runs requests through, and two backends for tests and
for exercising a client: :class:`SleepBackend` (decodes the images, then waits a set time)
and :class:`FaultyBackend` (wraps any backend and misbehaves on chosen requests)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from PIL import Image

REQUEST_HEADER = "X-Kimi-Bench-Request"  # JSON: {"stages_s": {...}, **FirstToken.report}
STREAM_FAULTS = ("no_token", "malformed", "reset")
FAULTS = ("http500", "stall", *STREAM_FAULTS)


@dataclass(frozen=True)
class FirstToken:
    """What a backend reports when a request's first token is ready."""

    stages_s: Mapping[str, float] = field(default_factory=dict)  # seconds per stage
    stage_bytes: Mapping[str, int] = field(default_factory=dict)  # bytes moved per stage
    prompt_tokens: int | None = None  # what the prompt became (text + image tokens), if known
    image_tokens: int | None = None  # what the processor made of the images, if known
    # per-request facts (numbers, short strings) the server sends back to the client with
    # the stages in the REQUEST_HEADER response header; a real server sends none
    report: Mapping[str, Any] = field(default_factory=dict)
    stream_fault: str | None = None  # test hook, one of STREAM_FAULTS; real backends leave None


class BackendError(Exception):
    """A request the backend cannot serve; becomes an HTTP error with this status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Backend(Protocol):
    """What the server needs from a pipeline. ``submit`` may be cancelled (the client went
    away); it must then release what the request holds."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def submit(self, request_id: str, images: list[bytes], prompt_tokens: int) -> FirstToken:
        """Run the request up to its first token; ``images`` are encoded files."""
        ...


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

    async def submit(self, request_id: str, images: list[bytes], prompt_tokens: int) -> FirstToken:
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

    async def submit(self, request_id: str, images: list[bytes], prompt_tokens: int) -> FirstToken:
        n, self.count = self.count, self.count + 1
        if self.requests is not None and n not in self.requests:
            return await self.inner.submit(request_id, images, prompt_tokens)
        if self.mode == "http500":
            raise BackendError(500, f"injected fault http500 on request {n}")
        if self.mode == "stall":
            await asyncio.sleep(self.stall_s)
            raise BackendError(504, f"injected stall of {self.stall_s:g} s on request {n}")
        first = await self.inner.submit(request_id, images, prompt_tokens)
        return dataclasses.replace(first, stream_fault=self.mode)
