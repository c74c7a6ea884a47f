"""What the server admits (``server``): its settings (``ServerOptions``, from ``kimi-bench
serve``'s options) and a chat-completions body read into the request it asks for
(``parse_chat``), refused with the right HTTP status when it is not one (``admit``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kimi_bench import __version__
from kimi_bench.infra.jsonio import InputError, parse_json
from kimi_bench.infra.limits import REQUEST_PIXELS_PER_IMAGE_LIMIT
from kimi_bench.options import MAX_TOKENS_LIMIT, REQUEST_MAX_TOKENS, ServeCommandOptions
from kimi_bench.serving.image_urls import image_payload
from kimi_bench.serving.intake import PixelLimits, Refused, check_images
from kimi_bench.serving.models import ServedModels
from kimi_bench.serving.usage import count_text_tokens


@dataclass(frozen=True)
class ServerOptions:
    """The server's settings, built from ``kimi-bench serve``'s options (``from_options``);
    their defaults are written there only (``kimi_bench.options.server``)."""

    model: str  # the model's name: listed first, named in every response
    aliases: tuple[str, ...]  # other names it answers to (--served-model-name A B ...)
    accept_any_model: bool  # serve unknown names too, one warning per name
    decode_interval_s: float  # between streamed tokens after the first
    api_key: str | None  # when set, /v1/* needs "Authorization: Bearer <key>"
    default_max_tokens: int  # for a request that names no max_tokens
    max_tokens_limit: int
    version: str
    max_pixels: int  # per image, read from its header
    max_request_pixels: int  # all images of a request
    max_body_bytes: int

    @classmethod
    def from_options(cls, opts: ServeCommandOptions, api_key: str | None) -> ServerOptions:
        """``api_key``: the value of ``opts.api_key_env`` (read, and checked, by the CLI)."""
        model, *aliases = opts.served_model_name
        total = opts.max_request_pixels
        if total is None:
            total = REQUEST_PIXELS_PER_IMAGE_LIMIT * opts.max_pixels
        return cls(
            model=model, aliases=tuple(aliases), accept_any_model=opts.accept_any_model,
            decode_interval_s=opts.decode_interval_ms / 1e3, api_key=api_key,
            default_max_tokens=REQUEST_MAX_TOKENS, max_tokens_limit=MAX_TOKENS_LIMIT,
            version=__version__, max_pixels=opts.max_pixels, max_request_pixels=total,
            max_body_bytes=round(opts.max_body_mb * 2**20),
        )  # fmt: skip

    @property
    def pixel_limits(self) -> PixelLimits:
        return PixelLimits(per_image=self.max_pixels, per_request=self.max_request_pixels)

    @property
    def served_names(self) -> tuple[str, ...]:
        return (self.model, *self.aliases)


@dataclass
class Chat:
    images: list[bytes]
    places: list[str]  # where each image was in the body ("messages[0].content[1]")
    model: str | None  # as requested (None: not given)
    prompt_tokens: int  # text tokens (usage.count_text_tokens)
    max_tokens: int
    stream: bool
    include_usage: bool


def _parse_content(
    content: Any, where: str, images: list[bytes], places: list[str], texts: list[str]
) -> None:
    if isinstance(content, str):
        texts.append(content)
        return
    if not isinstance(content, list):
        raise ValueError(f"{where}.content must be a string or a list of parts")
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            ref = part.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            try:
                images.append(image_payload(str(url)))
            except ValueError as exc:
                raise ValueError(f"{where}.content[{j}]: {exc}") from None
            places.append(f"{where}.content[{j}]")
        else:
            raise ValueError(f"{where}.content[{j}] has unsupported type {kind!r}")


def parse_chat(body: Any, opts: ServerOptions) -> Chat:
    """Validate a chat-completions body; ValueError names the first problem. Prompt tokens
    are the text parts' tokens by ``usage.count_text_tokens`` (a backend that knows better
    reports ``FirstToken.prompt_tokens``)."""
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError("model must be a string")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    images: list[bytes] = []
    places: list[str] = []
    texts: list[str] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise ValueError(f"messages[{i}] must be an object")
        _parse_content(msg.get("content", ""), f"messages[{i}]", images, places, texts)
    raw = body.get("max_completion_tokens", body.get("max_tokens", opts.default_max_tokens))
    if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= opts.max_tokens_limit:
        raise ValueError(f"max_tokens must be an integer in [1, {opts.max_tokens_limit}]")
    options = body.get("stream_options") or {}
    return Chat(
        images=images,
        places=places,
        model=model,
        prompt_tokens=count_text_tokens(texts),
        max_tokens=raw,
        stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
    )


def admit(raw: bytes, opts: ServerOptions, models: ServedModels) -> tuple[Chat, str | None]:
    """A request body -> the chat it asks for and the unknown model name to warn about (the
    first request for it, with ``accept_any_model``), or Refused: not JSON, not a valid
    chat (400), an unknown model (404), an unreadable image or one over the pixel limits
    (400, read from the headers). CPU work on the whole body: run it off the event loop."""
    try:
        body = parse_json(raw.decode("utf-8"), "bad request: the body is not JSON", constants=True)
    except UnicodeDecodeError as exc:
        raise Refused(400, "invalid_json", f"bad request: the body is not JSON: {exc}") from None
    except InputError as exc:  # not JSON, nested too deeply
        raise Refused(400, "invalid_json", str(exc)) from None
    try:
        chat = parse_chat(body, opts)
    except ValueError as exc:
        raise Refused(400, "invalid_request", f"bad request: {exc}") from None
    unknown = models.admit(chat.model)
    check_images(chat.images, chat.places, opts.pixel_limits)
    return chat, unknown
