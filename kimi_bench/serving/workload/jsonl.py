"""A JSONL request file (``serve-ab --requests-file FILE``): one OpenAI chat-completions
body per line, as a recorded trace holds them. Each line's text parts are its prompt, its
``image_url`` parts its images (a base64 data URL, a file path or ``file://`` URL,
relative to the file's folder, or an http(s) URL, fetched once here), ``max_tokens`` (or
``max_completion_tokens``) its output length; an optional top-level ``timestamp`` (seconds
from the trace start) is replayed with ``--replay-timestamps`` and never sent.

Every problem is refused with the file and line named before any server starts: a line
that is not JSON or not a chat body, an image that cannot be read or fetched, a file that
is not an image."""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from PIL import Image, UnidentifiedImageError

from kimi_bench.domain.corpus_files import InputError, read_image_bytes
from kimi_bench.options.workload_specs import WorkloadError
from kimi_bench.serving.trace import parse_data_url
from kimi_bench.serving.workload.folder import PIL_FORMATS

FETCH_TIMEOUT_S = 10.0
MAX_LINES = 100_000


@dataclass(frozen=True)
class FileImage:
    data: bytes
    format: str  # jpeg, png or webp
    width: int
    height: int
    origin: str  # the URL or path as written (a data URL as "data URL")


@dataclass(frozen=True)
class FileRequest:
    line: int
    prompt: str
    images: tuple[FileImage, ...]
    max_tokens: int | None
    timestamp_s: float | None


def _identify(data: bytes, where: str) -> tuple[str, int, int]:
    try:
        with Image.open(io.BytesIO(data)) as im:
            fmt, (w, h) = PIL_FORMATS.get(str(im.format)), im.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise WorkloadError(f"{where}: not an image PIL can read ({exc})") from None
    if fmt is None:
        raise WorkloadError(f"{where}: a {im.format} image (JPEG, PNG or WebP are served)")
    return fmt, int(w), int(h)


def _fetch(url: str, where: str, client: httpx.Client) -> bytes:
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        raise WorkloadError(f"{where}: cannot fetch {url}: {exc}") from None
    if response.status_code != 200:
        raise WorkloadError(f"{where}: {url} answered HTTP {response.status_code}")
    return response.content


def _image(url: str, base: Path, where: str, client: httpx.Client) -> FileImage:
    if url.startswith("data:"):
        try:
            data, origin = parse_data_url(url)[1], "data URL"
        except ValueError as exc:
            raise WorkloadError(f"{where}: {exc}") from None
    elif url.startswith(("http://", "https://")):
        data, origin = _fetch(url, where, client), url
    else:
        path = Path(url.removeprefix("file://"))
        path = path if path.is_absolute() else base / path
        try:
            data, origin = read_image_bytes(path), str(path)
        except (InputError, OSError) as exc:
            raise WorkloadError(f"{where}: image file {path}: {exc}") from None
    fmt, w, h = _identify(data, f"{where} ({origin})")
    return FileImage(data, fmt, w, h, origin)


def _parts(body: dict[str, Any], where: str) -> tuple[list[str], list[str]]:
    """(texts, image URLs) of a chat body's messages; WorkloadError when it is not one."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WorkloadError(f"{where}: not a chat body (no non-empty messages list)")
    texts: list[str] = []
    urls: list[str] = []
    for i, msg in enumerate(messages):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            texts.append(content)
            continue
        if not isinstance(content, list):
            raise WorkloadError(f"{where}: messages[{i}].content is not a string or a list")
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "image_url":
                ref = part.get("image_url")
                url = ref.get("url") if isinstance(ref, dict) else ref
                if not isinstance(url, str) or not url:
                    raise WorkloadError(f"{where}: messages[{i}].content[{j}] has no image URL")
                urls.append(url)
            else:
                raise WorkloadError(f"{where}: messages[{i}].content[{j}] is not a text or "
                                    "image_url part")  # fmt: skip
    return texts, urls


def _number(body: dict[str, Any], key: str, where: str, integer: bool) -> Any:
    v = body.get(key)
    if v is None:
        return None
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok or not math.isfinite(v) or v < (1 if integer else 0):
        kind = "an integer >= 1" if integer else "a number of seconds >= 0"
        raise WorkloadError(f"{where}: {key} must be {kind}, got {v!r}")
    return v


def _request(text: str, line: int, path: Path, client: httpx.Client) -> FileRequest:
    where = f"{path}:{line}"
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(body, dict):
        raise WorkloadError(f"{where}: not a chat body (a JSON object is expected)")
    texts, urls = _parts(body, where)
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = _number({"max_tokens": limit}, "max_tokens", where, True)
    stamp = _number(body, "timestamp", where, False)
    images = tuple(_image(u, path.parent, f"{where} image {k}", client) for k, u in enumerate(urls))
    return FileRequest(line, "\n".join(texts), images, max_tokens, stamp)


def read_requests(path: Path) -> list[FileRequest]:
    """Every request of the file (blank lines skipped), images read and fetched."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read the request file: {exc}") from None
    if len(lines) > MAX_LINES:
        raise WorkloadError(f"{path}: {len(lines):,} lines, over the limit of {MAX_LINES:,}")
    with httpx.Client(timeout=FETCH_TIMEOUT_S, follow_redirects=True, trust_env=False) as client:
        out = [_request(t, n, path, client) for n, t in enumerate(lines, 1) if t.strip()]
    if not out:
        raise WorkloadError(f"{path}: no request in the file")
    stamps = [r.timestamp_s for r in out]
    if any(s is not None for s in stamps) and None in stamps:
        first = next(r.line for r in out if r.timestamp_s is None)
        raise WorkloadError(f"{path}:{first}: no timestamp, but other lines have one")
    return out
