"""An ``image_url`` of a chat request as its encoded bytes, for ``kimi-bench serve``: a base64
data URL, or an http(s) URL on loopback (``127.0.0.0/8``, ``::1``, ``localhost``),
fetched here as a real server fetches it (the time is part of the request's TTFT). Other
hosts are refused: an emulator left running must not fetch what any client names."""

from __future__ import annotations

import ipaddress

import httpx

from kimi_bench.serving.trace import parse_data_url

FETCH_TIMEOUT_S = 30.0
MAX_IMAGE_BYTES = 256 * 2**20


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def fetch_loopback(url: str) -> bytes:
    """The body of a loopback http(s) URL; ValueError names what went wrong."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"bad image URL {url!r}: {exc}") from None
    if not _loopback(parsed.host):
        raise ValueError(
            f"image URL {url!r}: only base64 data URLs and http(s) URLs on "
            "loopback are accepted (this server fetches no other host)"
        )
    try:
        with httpx.Client(timeout=FETCH_TIMEOUT_S, trust_env=False) as client:
            response = client.get(url)
    except httpx.HTTPError as exc:
        raise ValueError(f"image URL {url!r}: cannot fetch it: {exc}") from None
    if response.status_code != 200:
        raise ValueError(f"image URL {url!r}: HTTP {response.status_code}")
    if len(response.content) > MAX_IMAGE_BYTES:
        raise ValueError(f"image URL {url!r}: over {MAX_IMAGE_BYTES:,} bytes")
    return response.content


def image_payload(url: str) -> bytes:
    """The encoded image an ``image_url`` names; ValueError says why not."""
    if url.startswith(("http://", "https://")):
        return fetch_loopback(url)
    return parse_data_url(url)[1]
