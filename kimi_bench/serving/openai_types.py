"""The OpenAI-style JSON documents the emulator answers with, typed: ``usage``, the chunks
of a streamed chat completion, a plain completion, and a ``/v1/models`` card."""

from __future__ import annotations

from typing import TypedDict


class PromptTokensDetails(TypedDict):
    cached_tokens: int
    text_tokens: int
    image_tokens: int
    prompt_tokens: int  # the text tokens alone (what GuideLLM reads; serving.usage)


class Usage(TypedDict):
    """The ``usage`` object of a response."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class Delta(TypedDict, total=False):
    """What one streamed chunk adds to the message."""

    role: str
    content: str


class ChunkChoice(TypedDict):
    index: int
    delta: Delta
    logprobs: None
    finish_reason: str | None


class ChunkBody(TypedDict, total=False):
    """The part of a ``chat.completion.chunk`` after its id, object, created and model."""

    choices: list[ChunkChoice]
    usage: Usage | None


class Message(TypedDict):
    role: str
    content: str


class CompletionChoice(TypedDict):
    index: int
    message: Message
    finish_reason: str


class Completion(TypedDict):
    """A plain (not streamed) ``chat.completion``."""

    id: str
    object: str
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage


class ModelCard(TypedDict):
    """One ``/v1/models`` entry."""

    id: str
    object: str
    created: int
    owned_by: str
    root: str
