"""Endpoints as the user gives them (``--endpoint NAME=URL``) and what a server says about
itself (``/v1/models``, a version). httpx only: options validation imports this without
the benchmark's heavy modules."""

from __future__ import annotations

import os
from typing import Any

import httpx

from kimi_bench.infra.jsonio import parse_json
from kimi_bench.options import parse_endpoint
from kimi_bench.serving.records import Scalar, ServerInfo

__all__ = ["CHAT_PATH", "auth_headers", "flush_cache", "parse_endpoint", "probe_server"]

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


def _scalars(entry: Any) -> dict[str, Scalar]:
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
                data = parse_json(r.text, "/v1/models", constants=True).get("data", [])
                info.models = [_scalars(m) for m in data] if isinstance(data, list) else []
            except (ValueError, AttributeError):  # InputError: not JSON, nested too deeply
                info.error = f"/v1/models did not answer JSON: {_excerpt(r.text)}"
        for path in ("/version", "/get_server_info"):
            try:
                v = client.get(path)
                body = parse_json(v.text, path, constants=True) if v.status_code == 200 else {}
                version = body.get("version")
            except (httpx.HTTPError, ValueError, AttributeError):
                continue
            if version:
                info.version, info.version_source = str(version), f"GET {path}"
                return info
        if info.server_header and "/" in info.server_header:
            info.version, info.version_source = info.server_header, "Server header"
    return info


def text_only_prompt_tokens(
    base_url: str, model: str, prompt: str, *, api_key_env: str, timeout_s: float = 60.0
) -> int | None:
    """``usage.prompt_tokens`` the server bills for ``prompt`` without images (one plain
    request, one output token): what an image request's prompt tokens must exceed if its
    images reached the vision tower. None when the server does not say."""
    message = {"role": "user", "content": [{"type": "text", "text": prompt}]}
    body = {"model": model, "max_tokens": 1, "stream": False, "temperature": 0,
            "messages": [message]}  # fmt: skip
    try:
        r = httpx.post(base_url.rstrip("/") + CHAT_PATH, json=body, timeout=timeout_s,
                       headers=auth_headers(api_key_env), trust_env=False)  # fmt: skip
        usage = parse_json(r.text, "usage", constants=True).get("usage") if r.is_success else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    n = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def flush_cache(base_url: str, headers: dict[str, str], timeout_s: float = 30.0) -> str:
    """POST ``/flush_cache`` (SGLang's route; ``kimi-bench serve`` has it too): what the
    server answered, in a few words ("ok", "ok: no preprocess cache", "HTTP 404", or why
    it could not be reached), kept in the arm's source."""
    try:
        r = httpx.post(f"{base_url}/flush_cache", headers=headers, timeout=timeout_s,
                       trust_env=False)  # fmt: skip
    except httpx.HTTPError as exc:
        return f"failed: {type(exc).__name__}: {_excerpt(str(exc))}"
    if r.status_code != 200:
        return f"HTTP {r.status_code}: {_excerpt(r.text)}"
    try:
        said = r.json()
    except ValueError:
        return "ok"
    if isinstance(said, dict) and said.get("preprocess_cache") is False:
        return "ok: no preprocess cache"
    return "ok"
