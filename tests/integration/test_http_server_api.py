"""``kimi-bench serve`` speaking like a real server, over HTTP: the model names it answers to
(aliases, vLLM's 404 for others, or any name with one warning each), emulated ``usage``
(text and image tokens, OpenAI's ``include_usage`` chunk) and one token per streamed chunk."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.options import EMULATOR_MODEL, ServeCommandOptions
from kimi_bench.serving.admission import ServerOptions
from kimi_bench.serving.backend import FirstToken
from kimi_bench.serving.server import LOG
from kimi_bench.serving.sse import FIRST_TOKEN_TEXT, NEXT_TOKEN_TEXT
from kimi_bench.serving.usage import USAGE_HEADER, count_text_tokens
from tests.integration.test_http_server import (
    CHAT,
    MODEL,
    Recorder,
    body,
    encoded,
    live,
    sse_events,
)

IMAGE_TOKENS = 7  # per image, from the backend below


class Processor(Recorder):
    """A backend that reports image tokens, as the emulator's processor does."""

    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int = 1
    ) -> FirstToken:
        await super().submit(request_id, images, prompt_tokens, max_tokens)
        return FirstToken(image_tokens=IMAGE_TOKENS * len(images))


@contextlib.contextmanager
def warnings_logged() -> Iterator[list[str]]:
    """The server's console lines (uvicorn's logger does not propagate to pytest's). Enter
    it once the server runs: uvicorn's logging set-up empties its child loggers' handlers."""
    lines: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    LOG.addHandler(handler)
    try:
        yield lines
    finally:
        LOG.removeHandler(handler)


def chat(c: Any, model: str | None, **extra: Any) -> Any:
    payload = body([encoded()], **extra)
    if model is None:
        del payload["model"]
    else:
        payload["model"] = model
    return c.post(CHAT, json=payload)


# ------------------------------------------------------------------- model names


def test_aliases_are_listed_and_served_under_the_first_name() -> None:
    backend = Recorder()
    with live(backend, aliases=("alias", "/models/tok")) as c:
        ids = [m["id"] for m in c.get("/v1/models").json()["data"]]
        answers = [chat(c, name) for name in (MODEL, "alias", "/models/tok", None)]
    assert ids == [MODEL, "alias", "/models/tok"]
    assert [r.status_code for r in answers] == [200] * 4
    assert {r.json()["model"] for r in answers} == {MODEL}  # vLLM: the first name
    assert len(backend.calls) == 4


def test_an_unknown_model_is_a_404_with_an_openai_error_body() -> None:
    backend = Recorder()
    with live(backend, aliases=("alias",)) as c:
        plain = chat(c, "gpt-4")
        streamed = chat(c, "gpt-4", stream=True)
        not_a_name = chat(c, 3)  # type: ignore[arg-type]
    for r in (plain, streamed):
        assert r.status_code == 404 and r.headers["content-type"] == "application/json"
        error = r.json()["error"]
        assert error["message"].startswith("The model `gpt-4` does not exist.")
        assert f"'{MODEL}', 'alias'" in error["message"]
        assert (error["type"], error["param"], error["code"]) == ("NotFoundError", "model", 404)
    assert not_a_name.status_code == 400
    assert "model must be a string" in not_a_name.json()["error"]["message"]
    assert backend.calls == []


def test_accept_any_model_serves_any_name_with_one_warning_per_name() -> None:
    backend = Recorder()
    with live(backend, accept_any_model=True) as c, warnings_logged() as lines:
        answers = [chat(c, name) for name in ("x", MODEL, "x", "/path/y", "x")]
        ids = [m["id"] for m in c.get("/v1/models").json()["data"]]
    assert [r.status_code for r in answers] == [200] * 5 and len(backend.calls) == 5
    assert {r.json()["model"] for r in answers} == {MODEL} and ids == [MODEL]
    served = [ln for ln in lines if "--accept-any-model" in ln]
    assert len(served) == 2, lines
    assert served[0].startswith(f"serving model 'x' as '{MODEL}'")
    assert served[1].startswith(f"serving model '/path/y' as '{MODEL}'")


def test_the_default_name_still_works() -> None:
    opts = ServerOptions.from_options(ServeCommandOptions(arm="eager"), api_key=None)
    assert opts.served_names == (EMULATOR_MODEL,) == ("kimi-bench-emulator",)
    assert ServeCommandOptions(arm="eager").served_model_name == (EMULATOR_MODEL,)


# -------------------------------------------------------------------------- usage


def test_usage_counts_text_and_image_tokens() -> None:
    text = "Hello, world! It's two pictures"  # Hello , ␣world ! ␣It 's ␣two ␣pictures
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    with live(Processor()) as c:
        payload = body([encoded(), encoded("PNG")])
        payload["messages"] = [
            {"role": "system", "content": "Be brief."},  # Be ␣brief .
            {"role": "user", "content": parts + payload["messages"][0]["content"][1:]},
        ]
        with_images = c.post(CHAT, json=payload)
        payload["messages"][1]["content"] = parts
        text_only = c.post(CHAT, json=payload)
    assert count_text_tokens([text]) == 8
    usage = with_images.json()["usage"]
    assert usage == {
        "prompt_tokens": 11 + 2 * IMAGE_TOKENS,
        "completion_tokens": 1,
        "total_tokens": 12 + 2 * IMAGE_TOKENS,
        "prompt_tokens_details": {
            "cached_tokens": 0,
            "text_tokens": 11,
            "image_tokens": 2 * IMAGE_TOKENS,
            "prompt_tokens": 11,
        },
    }
    # as GuideLLM reads it: text = details.prompt_tokens, plus details.image_tokens
    details = usage["prompt_tokens_details"]
    assert details["prompt_tokens"] + details["image_tokens"] == usage["prompt_tokens"]
    plain = text_only.json()["usage"]
    assert plain["prompt_tokens"] == 11 and plain["prompt_tokens_details"]["image_tokens"] == 0
    for r in (with_images, text_only):
        assert r.headers[USAGE_HEADER].startswith("emulated")


def test_include_usage_ends_the_stream_with_a_usage_chunk() -> None:
    with live(Processor()) as c:
        asked = sse_events(
            c, body([encoded()], 3, stream=True, stream_options={"include_usage": True})
        )
        not_asked = sse_events(c, body([encoded()], 3, stream=True))
    assert asked[-1] == not_asked[-1] == "[DONE]"
    chunks = [json.loads(e) for e in asked[:-1]]
    *body_chunks, last = chunks
    # OpenAI: every other chunk has "usage": null; the last has the usage and no choices
    assert all(ch["usage"] is None and len(ch["choices"]) == 1 for ch in body_chunks)
    assert last["choices"] == [] and last["id"] == body_chunks[0]["id"]
    assert last["usage"]["completion_tokens"] == 3
    assert last["usage"]["prompt_tokens"] == 4 + IMAGE_TOKENS
    assert body_chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in json.loads(e) for e in not_asked[:-1])


# ------------------------------------------------------------- one token a chunk


def test_each_streamed_chunk_is_one_token() -> None:
    n = 6
    with live(Recorder()) as c:
        events = sse_events(
            c, body([encoded()], n, stream=True, stream_options={"include_usage": True})
        )
        plain = c.post(CHAT, json=body([encoded()], n)).json()
    chunks = [json.loads(e) for e in events[:-1]]
    texts = [ch["choices"][0]["delta"]["content"] for ch in chunks[1:-2]]
    assert texts == [FIRST_TOKEN_TEXT] + [NEXT_TOKEN_TEXT] * (n - 1)
    assert chunks[-1]["usage"]["completion_tokens"] == n
    # by the pre-tokenizer rule: each chunk one piece, and the joined answer n pieces (no
    # chunk merges with its neighbour), the same text as the plain answer
    assert all(count_text_tokens([t]) == 1 for t in texts)
    assert count_text_tokens(["".join(texts)]) == n
    assert plain["choices"][0]["message"]["content"] == "".join(texts)
    assert plain["usage"]["completion_tokens"] == n


# -------------------------------------------------------------------- the command


def test_serve_passes_names_and_accept_any_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    import kimi_bench.serving.emulator_serve as emulator

    seen: list[ServerOptions] = []

    def fake_serve(conf: Any, opts: ServerOptions, host: str, port: int) -> Any:
        seen.append(opts)
        backend = SimpleNamespace(start_error=None, dead=None, leftover_segments=[])
        return SimpleNamespace(backend=backend, signal=None, requests={})

    monkeypatch.setattr(emulator, "serve_emulator", fake_serve)
    base = ["serve", "--arm", "eager", "--device", "cpu"]
    runner = CliRunner()
    args = ["--served-model-name", "/m/tok", "--model", "k3", "--accept-any-model"]
    assert runner.invoke(app, [*base, *args]).exit_code == 0
    assert runner.invoke(app, base).exit_code == 0
    assert (seen[0].model, seen[0].aliases, seen[0].accept_any_model) == ("/m/tok", ("k3",), True)
    assert (seen[1].served_names, seen[1].accept_any_model) == ((EMULATOR_MODEL,), False)
    bad = runner.invoke(app, [*base, "--served-model-name", " "])
    assert bad.exit_code == 2 and "cannot be empty" in bad.output


def test_serve_help_names_the_model_options_and_the_default() -> None:
    res = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    text = " ".join(res.output.split())
    assert res.exit_code == 0
    for words in (
        "--served-model-name",
        "--accept-any-model",
        EMULATOR_MODEL,
        "decode_gflop_per_token",
    ):
        assert words in text, words


class Cached(Recorder):
    """A backend with a preprocess cache, emptied by ``/flush_cache``."""

    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush_cache(self) -> bool:
        self.flushes += 1
        return True


def test_flush_cache_is_sglangs_route_and_says_whether_a_cache_was_emptied() -> None:
    from kimi_bench.serving.endpoints import flush_cache

    cached = Cached()
    with live(cached) as c:
        url = str(c.base_url).rstrip("/")
        assert flush_cache(url, {}) == "ok" and cached.flushes == 1
        assert c.get("/flush_cache").json() == {"flushed": True, "preprocess_cache": True}
        assert cached.flushes == 2
    with live(Recorder()) as c:  # a backend without a cache: flushed, nothing to empty
        assert flush_cache(str(c.base_url).rstrip("/"), {}) == "ok: no preprocess cache"
    keyed = Cached()
    with live(keyed, api_key="k") as c:
        url = str(c.base_url).rstrip("/")
        assert flush_cache(url, {}).startswith("HTTP 401") and keyed.flushes == 0
        assert flush_cache(url, {"Authorization": "Bearer k"}) == "ok" and keyed.flushes == 1
    assert flush_cache(url, {}).startswith("failed: ")  # the server is gone
