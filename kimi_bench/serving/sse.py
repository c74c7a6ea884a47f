"""One chat completion's answer: the OpenAI chunks of a streamed response (SSE), or the
text of a plain one, and how it ended. Tokens after the first follow every
``decode_interval_s``; when the server begins to stop, an open stream ends at once with
an OpenAI-style error event (no ``[DONE]``), so shutdown never waits on a long stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from kimi_bench.infra.fault_hooks import NO_FAULTS, FaultHooks
from kimi_bench.serving.intake import error_body
from kimi_bench.serving.openai_types import ChunkBody, ChunkChoice, Completion, Delta, Usage
from kimi_bench.serving.usage import PromptCount

STOPPING = "the server is shutting down"

# The text of each streamed token: "the", then " the" for every later one, so that a
# client that re-tokenizes the answer (sglang.bench_serving's retokenized counts, AIPerf's
# output lengths) counts one token per chunk. Byte-level BPE tokenizers (GPT-2, Llama-3,
# Qwen2) have both as single tokens and their pre-tokenizers cut "the the ..." before each
# " the"; SentencePiece (LLaMA-2) marks word starts itself, has one piece for a word-start
# "the", and would read a leading space on the first chunk as a token of its own, hence
# none there. Checked: "the" + (n-1) x " the" is n tokens for n = 1, 2, 5, 64 under GPT-2's
# BPE and Whisper's multilingual BPE (openai-whisper 20250625's assets, tiktoken 0.14),
# Mistral's Tekken (a Llama-3-style pre-tokenizer) and Mistral v1's SentencePiece model
# (LLaMA-2-style; mistral-common 1.13.1). A counter (" t0", " t1") is two or more tokens.
FIRST_TOKEN_TEXT = "the"
NEXT_TOKEN_TEXT = " the"


class ServerStopping(Exception):
    """The server began to stop while the answer was being produced."""


class ChatStream:
    """The tokens and chunks of one response. ``outcome`` says how a stream ended (None
    while it runs, or when the client left): ``ok``, ``error`` (it ended without a
    token, or its fault hooks broke it) or ``cancelled`` (the server stopped it)."""

    def __init__(
        self,
        rid: str,
        model: str,
        max_tokens: int,
        prompt: PromptCount,
        *,
        decode_interval_s: float,
        stop: asyncio.Event,
        include_usage: bool = False,
        hooks: FaultHooks = NO_FAULTS,
        next_token: Callable[[], Awaitable[float]] | None = None,
    ) -> None:
        self.rid, self.model, self.max_tokens, self.prompt = rid, model, max_tokens, prompt
        self.next_token = next_token  # the backend's decode (None: paced by the interval)
        self.interval, self.stop, self.include_usage = decode_interval_s, stop, include_usage
        self.hooks = hooks
        self.created = int(time.time())
        self.sent = 0
        self.outcome: str | None = None

    def _chunk(self, delta: Delta, finish: str | None = None) -> str:
        choice = ChunkChoice(index=0, delta=delta, logprobs=None, finish_reason=finish)
        body: ChunkBody = {"choices": [choice]}
        if self.include_usage:  # OpenAI: then every chunk but the last has "usage": null
            body["usage"] = None
        return self._event(body)

    def _event(self, extra: ChunkBody) -> str:
        obj = {"id": self.rid, "object": "chat.completion.chunk", "created": self.created}
        return f"data: {json.dumps({**obj, 'model': self.model, **extra})}\n\n"

    async def _pause(self) -> None:
        """The gap between two tokens (the backend's next decode step, else the interval);
        ServerStopping when the server stops meanwhile."""
        if self.next_token is not None:
            token = asyncio.ensure_future(self.next_token())
            stop = asyncio.ensure_future(self.stop.wait())
            try:
                await asyncio.wait({token, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                if not token.done():
                    token.cancel()
            if self.stop.is_set() or not token.done() or math.isnan(token.result()):
                raise ServerStopping(STOPPING)
            return
        if self.interval > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.interval)
        else:
            await asyncio.sleep(0)
        if self.stop.is_set():
            raise ServerStopping(STOPPING)

    async def tokens(self) -> AsyncIterator[str]:
        for i in range(self.max_tokens):
            if i:
                await self._pause()
            yield NEXT_TOKEN_TEXT if i else FIRST_TOKEN_TEXT

    def usage(self, completion: int) -> Usage:
        return self.prompt.usage(completion)

    async def _token_events(self) -> AsyncGenerator[str, None]:
        """One chunk per token; ``sent`` counts those taken."""
        async for tok in self.tokens():
            yield self._chunk({"content": tok})
            self.sent += 1

    async def events(self) -> AsyncGenerator[str, None]:
        """The SSE events; ``outcome`` is set once the last one was taken."""
        yield self._chunk({"role": "assistant", "content": ""})
        try:
            async for event in self.hooks.stream(self._token_events()):
                yield event
        except ServerStopping:
            self.outcome = "cancelled"
            yield f"data: {json.dumps(error_body(503, STOPPING, 'server_error'))}\n\n"
            return
        except ConnectionError:  # the hooks dropped the connection
            self.outcome = "error"
            raise
        yield self._chunk({}, "length" if self.sent else "stop")
        if self.include_usage:
            yield self._event({"choices": [], "usage": self.usage(self.sent)})
        yield "data: [DONE]\n\n"
        self.outcome = "ok" if self.sent else "error"

    async def text(self) -> str:
        """The whole answer of a plain (not streamed) response; ServerStopping."""
        return "".join([tok async for tok in self.tokens()])

    def completion(self, text: str) -> Completion:
        return {
            "id": self.rid,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length",
                }
            ],
            "usage": self.usage(self.max_tokens),
        }


class SSEResponse(StreamingResponse):
    """A streamed chat answer that reports how it ended, exactly once:
    ``on_end(outcome, tokens_sent)``, the outcome being the stream's own, or
    ``disconnected`` when the client went away first (Starlette then stops the stream;
    nothing is logged), or ``cancelled`` when the server cancelled the request."""

    def __init__(
        self,
        stream: ChatStream,
        on_end: Callable[[str, int], None],
        headers: Mapping[str, str],
    ) -> None:
        self._events = stream.events()
        super().__init__(
            self._events,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", **headers},
        )
        self.stream, self.on_end = stream, on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ended = "disconnected"
        try:
            await super().__call__(scope, receive, send)
        except ClientDisconnect:  # ASGI 2.4 servers: a write after the client left
            pass
        except asyncio.CancelledError:
            ended = "cancelled"
            raise
        finally:
            with contextlib.suppress(Exception):
                await self._events.aclose()  # a stream stopped at a yield ends now
            self.on_end(self.stream.outcome or ended, self.stream.sent)
