"""Endpoints as the user gives them (``--endpoint NAME=URL``) and what a server says about
itself (``/v1/models``, a version). httpx only: options validation imports this without
the benchmark's heavy modules."""

from __future__ import annotations

import os
from typing import Any

import httpx

from kimi_bench.options import parse_endpoint
from kimi_bench.serving.records import ServerInfo

__all__ = ["CHAT_PATH", "auth_headers", "parse_endpoint", "probe_server"]

CHAT_PATH = "/v1/chat/completions"
EXCERPT = 200  # characters of an error body kept in a record


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[:EXCERPT] + "..."


def auth_headers(api_key_env: str) -> dict[str, str]:
    key = os.environ.get(api_key_env)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _redact(text: str, api_key_env: str) -> str:
    key = os.environ.get(api_key_env)
    return text.replace(key, "<redacted>") if key else text


def _scalars(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {}
    return {k: v for k, v in entry.items() if isinstance(v, (str, int, float, bool))}


def probe_server(
    base_url: str, *, api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 10.0
) -> ServerInfo:
    """Read ``/v1/models`` and a server version; never raises for an unreachable or odd
    server (``error`` says what went wrong)."""
    info = ServerInfo(base_url=base_url.rstrip("/"))
    with httpx.Client(
        base_url=info.base_url,
        headers=auth_headers(api_key_env),
        timeout=timeout_s,
        trust_env=False,
    ) as client:
        try:
            r = client.get("/v1/models")
        except httpx.HTTPError as exc:
            info.error = _redact(f"cannot reach {info.base_url}: {exc}", api_key_env)
            return info
        info.server_header = r.headers.get("server")
        if r.status_code >= 400:
            info.error = f"/v1/models answered HTTP {r.status_code}: {_excerpt(r.text)}"
            info.error = _redact(info.error, api_key_env)
        else:
            try:
                data = r.json().get("data", [])
                info.models = [_scalars(m) for m in data] if isinstance(data, list) else []
            except (ValueError, AttributeError, RecursionError):
                info.error = f"/v1/models did not answer JSON: {_excerpt(r.text)}"
        for path in ("/version", "/get_server_info"):
            try:
                v = client.get(path)
                version = v.json().get("version") if v.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError, RecursionError):
                continue
            if version:
                info.version, info.version_source = str(version), f"GET {path}"
                return info
        if info.server_header and "/" in info.server_header:
            info.version, info.version_source = info.server_header, "Server header"
    return info
