"""The request trace a client sends: arrival offsets, encoded images per request, the prompt;
and the OpenAI chat-completions body built from it (images as base64 data URLs)."""

from __future__ import annotations

import base64
import binascii
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_PROMPT = "Describe the image."
MIME_TYPES = ("image/jpeg", "image/png", "image/webp")


@dataclass(frozen=True)
class Trace:
    """One seeded trace, the same for every endpoint it is sent to.

    ``images`` is a pool of encoded files (JPEG/PNG/WebP bytes); request ``i`` carries the
    pool entries ``image_keys[i]``, so a long trace does not hold one copy per request.
    Optional, per pool entry: ``mimes`` (else ``mime`` for all) and ``urls`` (sent instead
    of data URLs: ``--image-transport url``); per request: ``prompts`` (else ``prompt``)
    and ``max_tokens`` (None: the client's)."""

    arrivals: tuple[float, ...]
    images: tuple[bytes, ...]
    image_keys: tuple[tuple[int, ...], ...]
    prompt: str = DEFAULT_PROMPT
    mime: str = "image/jpeg"
    mimes: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    max_tokens: tuple[int | None, ...] = ()

    def __post_init__(self) -> None:
        if len(self.image_keys) != len(self.arrivals):
            raise ValueError(
                f"{len(self.arrivals)} arrivals but {len(self.image_keys)} image key lists"
            )
        if any(b < a for a, b in zip(self.arrivals, self.arrivals[1:], strict=False)):
            raise ValueError("arrival offsets must be non-decreasing")
        if self.arrivals and self.arrivals[0] < 0:
            raise ValueError("arrival offsets must be >= 0")
        bad = [k for keys in self.image_keys for k in keys if not 0 <= k < len(self.images)]
        if bad:
            raise ValueError(f"image key {bad[0]} is outside the pool of {len(self.images)}")
        for mime in (self.mime, *self.mimes):
            if mime not in MIME_TYPES:
                raise ValueError(f"mime must be one of {', '.join(MIME_TYPES)}, got {mime!r}")
        for name, n in (("mimes", len(self.images)), ("urls", len(self.images)),
                        ("prompts", len(self)), ("max_tokens", len(self))):  # fmt: skip
            got = len(getattr(self, name))
            if got and got != n:
                raise ValueError(f"{name} has {got} entries, expected {n} (or none)")

    def __len__(self) -> int:
        return len(self.arrivals)

    def request_images(self, i: int) -> list[bytes]:
        return [self.images[k] for k in self.image_keys[i]]

    def request_prompt(self, i: int) -> str:
        return self.prompts[i] if self.prompts else self.prompt

    def request_max_tokens(self, i: int) -> int | None:
        return self.max_tokens[i] if self.max_tokens else None

    @functools.cached_property
    def data_urls(self) -> tuple[str, ...]:
        """The pool as the URLs the bodies carry: ``urls``, or data URLs encoded once."""
        if self.urls:
            return self.urls
        mimes = self.mimes or (self.mime,) * len(self.images)
        return tuple(data_url(b, m) for b, m in zip(self.images, mimes, strict=True))


def make_trace(
    arrivals: Sequence[float],
    images: Sequence[bytes],
    images_per_request: int = 1,
    prompt: str = DEFAULT_PROMPT,
    mime: str = "image/jpeg",
) -> Trace:
    """Request ``i`` takes pool images ``(i * images_per_request + k) % len(images)`` for
    ``k < images_per_request`` (the assignment the in-process serve-ab producers use)."""
    if images_per_request < 0:
        raise ValueError("images_per_request must be >= 0")
    if images_per_request and not images:
        raise ValueError("an image pool is needed when images_per_request > 0")
    keys = tuple(
        tuple((i * images_per_request + k) % len(images) for k in range(images_per_request))
        for i in range(len(arrivals))
    )
    return Trace(tuple(float(a) for a in arrivals), tuple(images), keys, prompt, mime)


def data_url(payload: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"


def parse_data_url(url: str) -> tuple[str, bytes]:
    """``data:<mime>;base64,<payload>`` -> (mime, bytes). ValueError names what is wrong."""
    if not url.startswith("data:"):
        shown = url[:40] + ("..." if len(url) > 40 else "")
        raise ValueError(f"only base64 data URLs are accepted, got {shown!r}")
    head, sep, payload = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        raise ValueError("data URL is not base64 encoded (expected data:<mime>;base64,...)")
    try:
        return head[: -len(";base64")], base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"data URL payload is not valid base64: {exc}") from None


def chat_body(
    trace: Trace,
    i: int,
    model: str,
    max_tokens: int,
    *,
    include_usage: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The streaming chat-completions request for trace request ``i``: one user message,
    the prompt as a text part, then one ``image_url`` part per image. ``extra`` is merged
    last (server-specific fields such as ``ignore_eos``). The trace's own max tokens for
    ``i``, when it has them, replace ``max_tokens``."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": trace.request_prompt(i)}]
    parts += [
        {"type": "image_url", "image_url": {"url": trace.data_urls[k]}} for k in trace.image_keys[i]
    ]
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": trace.request_max_tokens(i) or max_tokens,
        "stream": True,
        "temperature": 0,
    }
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra or {})
    return body


def arrival_offsets(
    rate: float, n: int, burstiness: float = 1.0, seed: int = 0
) -> tuple[float, ...]:
    """Seconds from the trace start for ``n`` requests.

    ``rate`` = inf sends everything at once; otherwise gaps are gamma distributed with
    shape ``burstiness`` and mean 1/rate (burstiness 1 = Poisson arrivals)."""
    if n < 0:
        raise ValueError("request count must be >= 0")
    if math.isinf(rate):
        return (0.0,) * n
    if rate <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    rng = np.random.default_rng([seed, int(rate * 1000)])
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    return tuple(float(x) for x in np.cumsum(gaps))
