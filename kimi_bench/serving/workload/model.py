"""A workload's data: the pool of encoded images (each once) and the requests, each naming
its pool images, its prompt and max tokens, and its timestamp from a recorded trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kimi_bench.options.workload_specs import MIME


@dataclass(frozen=True)
class PoolImage:
    data: bytes
    format: str  # jpeg, png or webp
    width: int
    height: int
    origin: str  # a file, a URL, "generated"
    content: str | None = None  # a generated image's content (random, blank, photo)

    @property
    def mime(self) -> str:
        return MIME[self.format]


@dataclass(frozen=True)
class WorkRequest:
    keys: tuple[int, ...]  # pool images, in order
    prompt: str
    max_tokens: int | None = None  # None: --max-tokens
    timestamp_s: float | None = None


@dataclass(frozen=True)
class Workload:
    pool: tuple[PoolImage, ...]
    requests: tuple[WorkRequest, ...]
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def max_images(self) -> int:
        return max((len(r.keys) for r in self.requests), default=1) or 1

    @property
    def max_size(self) -> tuple[int, int]:
        """The largest width and the largest height (what an arena slot must hold)."""
        return max(p.width for p in self.pool), max(p.height for p in self.pool)

    @property
    def timestamps(self) -> tuple[float, ...] | None:
        """Offsets from the first timestamp, in request order; None without timestamps."""
        stamps = [r.timestamp_s for r in self.requests]
        if not stamps or any(s is None for s in stamps):
            return None
        t0 = min(s for s in stamps if s is not None)
        return tuple(sorted(float(s) - t0 for s in stamps if s is not None))
