"""The backend protocol the server runs requests through (the emulator's pipeline is one;
tests bring their own, ``tests/backends.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kimi_bench.infra.fault_hooks import NO_FAULTS, FaultHooks

REQUEST_HEADER = "X-Kimi-Bench-Request"  # JSON: {"stages_s": {...}, **FirstToken.report}


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
    hooks: FaultHooks = NO_FAULTS  # tests: whose stream() breaks this answer's stream
    # a backend that decodes: awaits its next token (the time it was ready; NaN when the
    # backend failed meanwhile); None: the server paces later tokens itself
    next_token: Callable[[], Awaitable[float]] | None = None


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

    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int
    ) -> FirstToken:
        """Run the request up to its first token; ``images`` are encoded files; a backend
        that decodes produces the other ``max_tokens - 1`` (``FirstToken.next_token``)."""
        ...
