"""The options of ``kimi-bench serve``: one arm's emulated pipeline behind an
OpenAI-compatible HTTP API (``kimi_bench.serving``). Written once, here: the command is
generated from this model, and the emulator's and the HTTP server's settings are built from
it (``serving.emulator.EmulatorConfig.from_options``,
``serving.admission.ServerOptions.from_options``), which hold no defaults of their own."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from kimi_bench.domain.runtime import get_profile
from kimi_bench.infra.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_PIXELS,
    REQUEST_PIXELS_PER_IMAGE_LIMIT,
)
from kimi_bench.options.base import (
    MAX_RANKS,
    MAX_TIMEOUT_S,
    Arm,
    Carrier,
    CarrierField,
    FaultHooksSpec,
)
from kimi_bench.options.common import StandinOptions, _Pipeline, runtime_defaults
from kimi_bench.options.parse import parse_resolution

EMULATOR_MODEL = "kimi-bench-emulator"  # the model name the emulator serves by default
# what the API grants a request (not options: the OpenAI-compatible servers' behaviour):
# the tokens a request that names no max_tokens gets, and the most one may ask for
REQUEST_MAX_TOKENS = 1
MAX_TOKENS_LIMIT = 4096
# serve-ab starts one emulator server per arm, side by side, and gives each this long to
# come up (its own setting, not --start-timeout's default: it was always the longer one)
SERVE_AB_START_TIMEOUT_S = 300.0
# the hidden command that serves the options model written to a file (serve-ab starts its
# emulator servers so: the typed options travel whole, not as a command line)
SERVE_FROM_OPTIONS = "serve-from-options"
# The load generator's settings that no command exposes: how long one connection attempt
# may take, and how many consecutive connection failures end an arm (a dead server).
CLIENT_CONNECT_TIMEOUT_S = 10.0
CLIENT_DEAD_AFTER = 5


def _standin_pairs(value: Any) -> Any:
    """``["encoder_gflop_per_patch=1.2", ...]`` (``--standin``, repeatable) -> a dict."""
    if not isinstance(value, (list, tuple)):
        return value
    known = StandinOptions.model_fields
    out: dict[str, str] = {}
    for pair in value:
        key, sep, text = str(pair).partition("=")
        if not sep or key.strip() not in known:
            raise ValueError(f"takes KEY=VALUE with KEY one of {', '.join(known)}, got {pair!r}")
        out[key.strip()] = text.strip()
    return out


class ServeCommandOptions(_Pipeline):
    cli_flags: ClassVar[dict[str, tuple[str, ...]]] = {
        "standins": ("--standin",),
        "served_model_name": ("--served-model-name", "--model"),
    }
    cli_repeatable: ClassVar[tuple[str, ...]] = ("standins", "served_model_name")

    arm: Arm = Field(
        "deferred",
        description="Pipeline to serve, as serve-ab's arms: deferred (the change, the "
        "default), eager (before it), zero-copy or deferred-decode (proposed); "
        "vllm-uint8 under --runtime vllm-0.33 (its default there).",
    )
    port: int = Field(8000, ge=0, le=65535, description="TCP port.")
    host: str = Field("127.0.0.1", description="Address to listen on.")
    ranks: int = Field(2, ge=1, le=MAX_RANKS, description="Scheduler (TP) ranks.")
    processor_workers: int = Field(2, ge=1, le=64, description="Producer (tokenizer worker) "
                                   "processes.")  # fmt: skip
    transport: CarrierField = "shm"

    @model_validator(mode="before")
    @classmethod
    def _runtime_defaults(cls, data: Any) -> Any:
        """Under vllm-0.33 the arm and carrier not given are vLLM's."""
        return runtime_defaults(data, typing.get_args(Carrier), "arm")

    @model_validator(mode="after")
    def _runtime_has_arm(self) -> ServeCommandOptions:
        """The arm and carrier must be the runtime's (``--runtime vllm-0.33 --arm
        vllm-uint8 --transport vllm-mq``); any other is refused, naming both."""
        get_profile(self.runtime).check_arms([self.arm], self.transport)
        return self

    api_key_env: str | None = Field(
        None,
        description="Name of an environment variable holding an API key; when set, /v1/* "
        "requires 'Authorization: Bearer <key>'.",
    )
    decode_interval_ms: float = Field(0.0, ge=0, le=60_000, allow_inf_nan=False,
                                      description="Gap between streamed tokens after the "
                                      "first, for a backend without a decode step (the test "
                                      "backends). The emulator ignores it: its decode is the "
                                      "stand-in decode step (--standin "
                                      "decode_gflop_per_token=G).")  # fmt: skip
    standins: StandinOptions = Field(
        default_factory=StandinOptions,  # type: ignore[arg-type]
        description=f"Stand-in cost KEY=VALUE ({', '.join(StandinOptions.model_fields)}); "
        "repeatable.",
    )
    start_timeout: float = Field(180.0, ge=1, le=MAX_TIMEOUT_S, allow_inf_nan=False,
                                 description="Seconds for the pipeline to come up.")  # fmt: skip
    arena_image: str = Field("1536x1024", description="zero-copy arm: arena slots hold requests "
                             "of --image-count images of this WIDTHxHEIGHT (larger images fail "
                             "alone).")  # fmt: skip
    image_count: int = Field(1, ge=1, le=64, description="zero-copy arm: images per request.")
    arena_requests: int = Field(64, ge=2, le=4096, description="zero-copy arm: arena slots.")
    max_pixels: int = Field(
        DEFAULT_MAX_PIXELS, ge=1, le=2**31,
        description="Refuse (HTTP 400) an image with more pixels, read from its header before "
        "anything is decoded (a decompression bomb guard; parity's limit). PIL itself refuses "
        "images over 178,956,970 pixels.",
    )  # fmt: skip
    max_request_pixels: int | None = Field(
        None, ge=1, le=2**40,
        description="Refuse (HTTP 400) a request whose images have more pixels together "
        f"[default: {REQUEST_PIXELS_PER_IMAGE_LIMIT}x --max-pixels].",
    )  # fmt: skip
    max_body_mb: float = Field(
        DEFAULT_MAX_BODY_BYTES / 2**20, ge=0.001, le=4096, allow_inf_nan=False,
        description="Refuse (HTTP 413) a request body larger than this many MiB (base64 images "
        "make it).",
    )  # fmt: skip
    fault_hooks: FaultHooksSpec = None
    profile: Path | None = Field(
        None, description="Write torch profiler traces (Chrome trace JSON) of the producer "
        "and each rank (the owners) into this folder: PROCESS.trace.json, with the pipeline's "
        "stage names, for --profile-requests requests.",
    )  # fmt: skip
    profile_requests: int = Field(3, ge=1, le=1000, description="Requests each process "
                                  "profiles with --profile.")  # fmt: skip
    profile_after: int = Field(1, ge=0, le=1_000_000, description="Requests served before "
                               "--profile starts (the start-up request is the first).")  # fmt: skip
    # what the API answers to (serving.models) and how it counts tokens (serving.usage)
    served_model_name: tuple[str, ...] = Field(
        (EMULATOR_MODEL,),
        min_length=1,
        description="A model name the API answers to; repeat for aliases (vLLM's "
        "--served-model-name A B is --served-model-name A --served-model-name B). The first "
        "is listed first in /v1/models and named in every response; a client that loads a "
        "tokenizer or processor by model name can pass its path here. Other names get HTTP "
        "404, as in vLLM.",
    )
    accept_any_model: bool = Field(
        False,
        description="Serve requests for any model name, as SGLang does, with one warning "
        "line per unknown name. usage is emulated either way: text tokens are GPT-2 "
        "pre-tokenizer pieces of the request's text parts, image tokens the emulated "
        "processor's, itemised in usage.prompt_tokens_details.",
    )

    _standins = field_validator("standins", mode="before")(_standin_pairs)

    @field_validator("served_model_name")
    @classmethod
    def _names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(n.strip() for n in v))  # the first stays first
        if not all(names):
            raise ValueError("a model name cannot be empty")
        return names

    @field_validator("arena_image")
    @classmethod
    def _arena_image(cls, v: str) -> str:
        parse_resolution(v, "wxh")
        return v

    @property
    def arena_size(self) -> tuple[int, int]:
        return parse_resolution(self.arena_image, "wxh")
