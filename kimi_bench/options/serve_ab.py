"""The options of ``serve-ab`` (``ServeOptions``): the workload, the request shape and the
capacity search (``workload``), the arms or ``--endpoint`` servers, the client's settings.
Parity's and micro's models are in ``scenarios``; what every scenario shares in ``common``."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, WithJsonSchema, field_validator, model_validator

from kimi_bench.options.base import (
    MAX_TIMEOUT_S,
    Arm,
    CarrierField,
    FaultHooksSpec,
    Launcher,
)
from kimi_bench.options.common import StandinOptions, _RunsArms
from kimi_bench.options.parse import (
    _split_list,
    distinct_arms,
    migrate_image_resolution,
    parse_endpoint,
    parse_goodput,
    parse_percentiles,
    parse_rates,
    parse_resolution,
)
from kimi_bench.options.scenarios import _LIST_SCHEMA, MachineRanks
from kimi_bench.options.workload import CapacityOptions, RequestShapeOptions, WorkloadOptions
from kimi_bench.options.workload_specs import parse_contents

# What a scenario file may write for the fields parsed from text (JSON Schema of the file).
_RATES_SCHEMA = WithJsonSchema({"oneOf": [
    {"type": "string", "description": "comma-separated req/s or inf, e.g. 2,8,inf"},
    {"type": "array", "items": {"type": ["number", "string"]}},
]})  # fmt: skip
_RES_SCHEMA = WithJsonSchema({"oneOf": [
    {"type": "string", "description": "WIDTHxHEIGHT (deprecated: image_resolution)"},
    {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 2},
    {"type": "null"},
]})  # fmt: skip


class ServeOptions(WorkloadOptions, RequestShapeOptions, CapacityOptions, _RunsArms):
    rates: Annotated[tuple[float, ...], _RATES_SCHEMA] = Field(
        (2.0, 8.0, math.inf),
        validation_alias=AliasChoices("rates", "request_rate"),
        description="Request rates in req/s, comma-separated; inf = all at once.",
    )
    requests: int | None = Field(
        None, ge=1, le=100_000, validation_alias=AliasChoices("requests", "num_prompts"),
        description="Measured requests per rate and arm [GPU: 200, CPU: 16].",
    )  # fmt: skip
    images_per_request: int = Field(
        1, ge=1, le=64, validation_alias=AliasChoices("images_per_request", "image_count"),
        description="Images per request: a count, a range 1-4 or weights 1:5,2:3,4:1.",
    )  # fmt: skip
    image_resolution: str | None = Field(
        None, description="Request image size WIDTHxHEIGHT (e.g. 1536x1024), a preset "
        "(720p, 1080p, 1440p, 4k), width=W,height=H, or hxw:HEIGHTxWIDTH for "
        "sglang.bench_serving's order [GPU: 1536x1024, CPU: 640x480].",
    )  # fmt: skip
    resolution: Annotated[tuple[int, int] | None, _RES_SCHEMA] = Field(
        None, description="Deprecated spelling of --image-resolution WIDTHxHEIGHT."
    )
    ranks: MachineRanks = None
    processor_workers: int = Field(2, ge=1, le=64, description="Producer processes.")
    transport: CarrierField = "shm"
    arms: Annotated[tuple[Arm, ...], _LIST_SCHEMA] = Field(
        ("eager", "deferred"), description="Arms to run."
    )
    burstiness: float = Field(1.0, gt=0, le=1000, description="Gamma shape of arrival gaps "
                              "(1 = Poisson).")  # fmt: skip
    warmup_requests: int = Field(4, ge=0, le=10_000, description="Unmeasured requests first.")
    repeats: int = Field(1, ge=1, le=100, description="Repeats per rate and arm.")
    image_content: str = Field(
        "random", description="random, blank or photo, or a mix such as photo:3,random:1 (each "
        "generated image drawn from it, seeded).",
    )  # fmt: skip
    unique_images: int = Field(16, ge=1, le=10_000, description="Distinct encoded payloads.")
    request_timeout_s: float = Field(60.0, gt=0, le=MAX_TIMEOUT_S, description="One deadline "
                                     "per request, in seconds, covering connect, the response "
                                     "headers, the first token and the whole stream; past it "
                                     "the request fails (timeout).")  # fmt: skip
    launcher: Launcher = Field("auto", description="spawn, torchrun, or auto (torchrun when "
                               "its environment is set).")  # fmt: skip
    max_concurrency: int | None = Field(None, ge=1, le=100_000, description="Cap on "
                                        "requests in flight (HTTP client).")  # fmt: skip
    endpoints: tuple[str, ...] = Field((), description="NAME=URL of a real OpenAI-compatible "
                                       "server (repeatable; one = a plain benchmark, two or "
                                       "more = an A/B vs the first; the arms are the names; a "
                                       "trailing /v1 is dropped).")  # fmt: skip

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        parsed = [parse_endpoint(text) for text in v]  # ValueError: a usage error
        names = [name for name, _ in parsed]
        if len(set(names)) != len(names):
            raise ValueError(f"--endpoint names must be distinct, got {', '.join(names)}")
        return tuple(f"{name}={url}" for name, url in parsed)

    model: str | None = Field(None, description="Model name sent to --endpoint servers "
                              "[default: the first model each server lists].")  # fmt: skip
    max_tokens: int = Field(
        1, ge=1, le=65_536, validation_alias=AliasChoices("max_tokens", "random_output_len"),
        description="Output tokens per request (sglang.bench_serving's and vllm bench serve's "
        "--random-output-len); above 1 the emulator decodes the rest with its stand-in decode "
        "step and ITL, TPOT and E2E latency mean something.",
    )  # fmt: skip
    metric_percentiles: Annotated[tuple[float, ...], _LIST_SCHEMA] = Field(
        (50.0, 90.0, 99.0),
        description="Percentiles of TTFT, ITL, TPOT and E2E latency in the per-rate table, "
        "comma-separated (vllm bench serve's --metric-percentiles), e.g. 50,90,99,99.9.",
    )
    goodput: tuple[str, ...] = Field(
        (), description="SLOs KEY:MS for goodput, the rate of requests that meet all of them "
        "(repeatable, or space-separated as vllm bench serve and sglang.bench_serving take "
        "--goodput): ttft, tpot, e2el, e.g. --goodput 'ttft:500 tpot:50 e2el:2000'.",
    )  # fmt: skip
    profile: Path | None = Field(
        None, description="Write torch profiler traces (Chrome trace JSON) of the emulator's "
        "producer and each owner rank for a few measured requests into this folder, named in "
        "the report (emulated arms only).",
    )  # fmt: skip
    profile_server: bool = Field(
        False, description="Around each measured trace, call the --endpoint servers' "
        "/start_profile and /stop_profile (SGLang's and vLLM's profiler endpoints, as their "
        "own benchmark clients do); a server without them gets a warning.",
    )  # fmt: skip
    api_key_env: str = Field("OPENAI_API_KEY", description="Env variable with the API key.")
    retry_429: int = Field(0, ge=0, le=10, description="Resend a request answered HTTP 429 up "
                           "to N times after its Retry-After (at most 30 s; within "
                           "--request-timeout); 0 counts a 429 as a failed request.")  # fmt: skip
    standins: StandinOptions = Field(default_factory=StandinOptions)  # type: ignore[arg-type]
    fault_hooks: FaultHooksSpec = None

    _arms = field_validator("arms", mode="before")(_split_list)

    @field_validator("arms")
    @classmethod
    def _distinct_arms(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        """Each arm is a server and a name in the report: one of each."""
        return distinct_arms(v)

    @field_validator("image_content")
    @classmethod
    def _contents(cls, v: str) -> str:
        parse_contents(v)
        return v

    @model_validator(mode="after")
    def _arms_or_endpoints(self) -> ServeOptions:
        """With ``--endpoint`` the arms are the endpoints' names: other ``--arms`` would be
        ignored, so they are refused."""
        names = tuple(e.partition("=")[0] for e in self.endpoints)
        if names and "arms" in self.model_fields_set and tuple(self.arms) != names:
            raise ValueError(
                f"--arms {','.join(self.arms)} does not apply with --endpoint: the arms are "
                f"the endpoints' names ({', '.join(names)}); leave --arms out"
            )
        return self

    @model_validator(mode="after")
    def _profile_what(self) -> ServeOptions:
        """``--profile`` traces the emulated arms' processes into a folder: a file in its
        place, or a run whose every arm is an ``--endpoint`` server, would write nothing."""
        if self.profile is None:
            return self
        if self.profile.exists() and not self.profile.is_dir():
            raise ValueError(
                f"--profile {self.profile} is a file: give a folder (the traces are written "
                "into it, one subfolder per arm)"
            )
        if self.endpoints:
            raise ValueError(
                "--profile traces the emulated pipeline's processes, and with --endpoint "
                "every arm is a server kimi-bench did not start: use --profile-server (the "
                "servers' own /start_profile and /stop_profile) instead"
            )
        return self

    @model_validator(mode="after")
    def _capacity_needs_slos(self) -> ServeOptions:
        if self.capacity and not self.goodput:
            raise ValueError("--capacity finds the highest rate meeting --goodput SLOs: give "
                             "--goodput, e.g. --goodput 'ttft:2000'")  # fmt: skip
        if self.capacity and self.replay_timestamps:
            raise ValueError("--capacity chooses the rates: leave --replay-timestamps out")
        return self

    @field_validator("rates", mode="before")
    @classmethod
    def _rates(cls, v: Any) -> Any:
        return parse_rates(v)

    @field_validator("metric_percentiles", mode="before")
    @classmethod
    def _percentiles(cls, v: Any) -> Any:
        return parse_percentiles(v)

    @field_validator("goodput", mode="before")
    @classmethod
    def _goodput(cls, v: Any) -> Any:
        parts = v.split() if isinstance(v, str) else [p for x in v for p in str(x).split()]
        parse_goodput(parts)  # ValueError names the bad SLO
        return tuple(parts)

    @property
    def slos(self) -> dict[str, float]:
        return parse_goodput(self.goodput) if self.goodput else {}

    @model_validator(mode="before")
    @classmethod
    def _resolution(cls, data: Any) -> Any:
        """``image_resolution`` and the older ``resolution`` (both WIDTHxHEIGHT) land in
        ``resolution`` as (width, height); giving both is an error, except in a dumped
        model (a report's config), where they agree, or agree in the HEIGHTxWIDTH order of
        reports written before the convention was unified (migrated, see
        :func:`migrate_image_resolution`)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        new, old = data.get("image_resolution"), data.get("resolution")
        if new is not None and old is not None:
            migrated = None if isinstance(old, str) else migrate_image_resolution(str(new), old)
            if migrated is None:
                raise ValueError(
                    "give --image-resolution or the older --resolution (image_resolution or "
                    "resolution in a scenario), not both"
                )
            data["image_resolution"] = migrated
            data["resolution"] = tuple(old)
            return data
        if new is not None:
            with contextlib.suppress(ValueError):  # reported by _image_resolution, by name
                data["resolution"] = parse_resolution(str(new))
        return data

    @field_validator("image_resolution")
    @classmethod
    def _image_resolution(cls, v: str | None) -> str | None:
        if v is not None:
            parse_resolution(v)
        return v

    @field_validator("resolution", mode="before")
    @classmethod
    def _old_resolution(cls, v: Any) -> Any:
        return parse_resolution(v) if isinstance(v, str) else v

    @field_validator("resolution")
    @classmethod
    def _sides(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        """A (width, height) given as a list in a scenario is bounded like the text forms."""
        if v is not None and not all(1 <= side <= 65_535 for side in v):
            raise ValueError(f"bad image resolution {list(v)}: sides must be 1..65535 pixels")
        return v

    @property
    def arm_names(self) -> tuple[str, ...]:
        """The arms: the endpoint names with --endpoint, else the emulated arms."""
        return tuple(e.partition("=")[0] for e in self.endpoints) or tuple(self.arms)

    @property
    def width_height(self) -> tuple[int, int]:
        if self.resolution is None:
            raise ValueError("resolution not resolved (call resolve_defaults first)")
        return self.resolution
