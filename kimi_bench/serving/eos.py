"""``--ignore-eos`` as each server spells it. sglang, vLLM and the emulator take the body
field ``ignore_eos: true`` (what sglang.bench_serving and vllm bench serve send);
``transformers serve`` refuses fields it does not know (HTTP 422) and takes generation
settings as a ``generation_config`` JSON string instead, where ``min_new_tokens`` equal to
the request's max tokens keeps the end-of-sequence token from ending it early.

Which server an endpoint is: ``transformers serve`` lists its own routes
(``/v1/systemone``, ``/load_model``) in its FastAPI ``/openapi.json``; anything else gets
the common field. The spelling used is kept in the arm's source in the report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

TRANSFORMERS_ROUTES = ("/v1/systemone", "/load_model")
COMMON = "ignore_eos"
TRANSFORMERS = "generation_config.min_new_tokens"


def eos_spelling(base_url: str, headers: Mapping[str, str], timeout_s: float = 10.0) -> str:
    """``TRANSFORMERS`` for a transformers serve endpoint, else ``COMMON``."""
    try:
        r = httpx.get(f"{base_url}/openapi.json", headers=dict(headers), timeout=timeout_s,
                      trust_env=False)  # fmt: skip
        paths = r.json().get("paths", {}) if r.status_code == 200 else {}
    except (httpx.HTTPError, ValueError, AttributeError):
        return COMMON
    return TRANSFORMERS if any(p in paths for p in TRANSFORMERS_ROUTES) else COMMON


def ignore_eos_fields(spelling: str, max_tokens: int) -> dict[str, Any]:
    """The body fields that ask the server to generate all ``max_tokens``."""
    if spelling == TRANSFORMERS:
        return {"generation_config": json.dumps({"min_new_tokens": max_tokens})}
    return {"ignore_eos": True}
