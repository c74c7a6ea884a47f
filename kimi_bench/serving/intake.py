"""What the server checks before a request reaches the backend: the body is read within a
byte limit (HTTP 413 past it, from ``Content-Length`` before reading when the client
sends one) and every image's size is read from its header, not decoded, against the
pixel limits (HTTP 400), so a small PNG that would decode to gigabytes costs nothing.
Refusals carry an OpenAI-style error body and a short reason for the metrics."""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

# reasons a request is refused (the ``reason`` label of kimi_bench_refused_requests_total)
REASONS = (
    "body_too_large",
    "image_too_large",
    "invalid_image",
    "invalid_json",
    "invalid_request",
    "unknown_model",
    "unauthorized",
)


def error_body(status: int, message: str, kind: str, param: str | None = None) -> dict:
    """The OpenAI error object (``code`` holds the HTTP status, as vLLM and SGLang do)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


class Refused(Exception):
    """A request the server will not run; ``response()`` is its JSON error."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.reason, self.kind, self.param = status, reason, kind, param

    def response(self) -> JSONResponse:
        body = error_body(self.status, str(self), self.kind, self.param)
        # a body left unread (413) ends the connection: say so, so the client does not
        # send its next request on it
        headers = {"Connection": "close"} if self.status == 413 else None
        return JSONResponse(body, status_code=self.status, headers=headers)


def _too_large(limit: int, declared: int | None = None) -> Refused:
    size = f"has {declared:,} bytes (Content-Length)" if declared else "is larger"
    return Refused(
        413,
        "body_too_large",
        f"the request body {size}, over the limit of {limit:,} bytes "
        "(kimi-bench serve --max-body-mb)",
    )


# A body over the limit is read on and dropped, up to these bounds, before the 413 goes
# out: a server that closes a connection with unread data makes the kernel reset it, and
# the client may then lose the 413 (nginx's "lingering close" does the same).
DRAIN_BYTES = 256 * 1024 * 1024
DRAIN_S = 10.0


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    deadline, dropped = time.monotonic() + DRAIN_S, 0
    with contextlib.suppress(ClientDisconnect):
        async for chunk in chunks:
            dropped += len(chunk)
            if dropped > DRAIN_BYTES or time.monotonic() > deadline:
                return


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused (413) once it is known to exceed ``limit`` bytes: from
    ``Content-Length`` before keeping any of it, else while reading a chunked body (the
    rest is dropped, ``DRAIN_BYTES`` / ``DRAIN_S`` at most, so the client reads the 413).
    ``starlette.requests.ClientDisconnect`` when the client leaves meanwhile."""
    declared = request.headers.get("content-length")
    chunks = request.stream()
    if declared is not None and declared.isdigit() and int(declared) > limit:
        await _drain(chunks)
        raise _too_large(limit, int(declared))
    kept: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            await _drain(chunks)
            raise _too_large(limit)
        kept.append(chunk)
    return b"".join(kept)


@dataclass(frozen=True)
class PixelLimits:
    per_image: int
    per_request: int


def image_size(payload: bytes, label: str, place: str | None = None) -> tuple[int, int]:
    """(width, height) from the file's header; nothing is decoded. Refused (400) when PIL
    cannot identify the file or refuses its header as a decompression bomb; ``place``
    (where the image is in the body) becomes the error's ``param``."""
    try:
        with warnings.catch_warnings():
            # the size is checked against our own limit below; PIL's warning is redundant
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(payload)) as im:
                return int(im.width), int(im.height)
    except Image.DecompressionBombError as exc:
        raise Refused(  # over PIL's own limit (2x Image.MAX_IMAGE_PIXELS), whatever ours
            400,
            "image_too_large",
            f"{label} is refused by PIL as a decompression bomb: {exc}",
            param=place,
        ) from None
    except UnidentifiedImageError:
        why = "PIL does not recognise its format"
    except (OSError, SyntaxError, ValueError) as exc:
        why = f"{type(exc).__name__}: {exc}"
    message = f"{label} is not an image file PIL can read: {why}"
    raise Refused(400, "invalid_image", message, param=place)


def check_images(images: Sequence[bytes], places: Sequence[str], limits: PixelLimits) -> int:
    """Every image's size from its header against the limits; the request's pixels.
    Refused (400) names the first image over ``per_image`` or the total over
    ``per_request``."""
    total = 0
    for k, (payload, place) in enumerate(zip(images, places, strict=True)):
        label = f"image {k} ({place})"
        w, h = image_size(payload, label, place)
        if w * h > limits.per_image:
            raise Refused(
                400,
                "image_too_large",
                f"{label} is {w}x{h} = {w * h:,} pixels, over the limit of "
                f"{limits.per_image:,} per image (kimi-bench serve --max-pixels)",
                param=place,
            )
        total += w * h
    if total > limits.per_request:
        raise Refused(
            400,
            "image_too_large",
            f"the request's {len(images)} images have {total:,} pixels together, over the "
            f"limit of {limits.per_request:,} per request (kimi-bench serve "
            "--max-request-pixels)",
        )
    return total
