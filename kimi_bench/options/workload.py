"""serve-ab's workload options (what the requests carry: a folder of images, a JSONL request
file or synthetic distributions of sizes, counts and formats, repeats), how requests are
shaped for real servers (``--ignore-eos``, ``--extra-body``, ``--header``, the prompt, the
image transport) and the capacity search. Mixed into ``ServeOptions``; the workload itself is
built by ``kimi_bench.serving.workload``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kimi_bench.options.base import MAX_RATE, _Options
from kimi_bench.options.common import _folder
from kimi_bench.options.workload_specs import (
    WorkloadError,
    parse_counts,
    parse_formats,
    parse_sizes,
)

ImageTransport = Literal["base64", "url"]


def _no_folder(text: str) -> list[tuple[int, int]]:
    return [(1, 1)]  # folder:DIR is read when the workload is built (the folder is checked)


class WorkloadOptions(_Options):
    images: Path | None = Field(
        None, description="Folder of your request images (JPEG, PNG, WebP; recursive; any other "
        "file is refused by name before the run), drawn in a seeded order.",
    )  # fmt: skip
    _images = field_validator("images")(_folder())
    image_sizes: str | None = Field(
        None, description="Generated image sizes: random:256x256-2048x2048 (a range, each side "
        "uniform), 640x480:3,1536x1024:1 (weights) or folder:DIR (the sizes of a folder's "
        "images) [default: --image-resolution].",
    )  # fmt: skip
    image_count_mix: str | None = Field(
        None, description="Images per request as a distribution, set by --images-per-request "
        "1-4 (a range, each equally likely) or 1:5,2:3,4:1 (weights).",
    )  # fmt: skip
    image_format: str = Field(
        "jpeg", description="Generated images' format: jpeg (q85), png, webp or a mix such as "
        "jpeg:3,png:1.",
    )  # fmt: skip
    repeat_share: float | None = Field(
        None, ge=0, lt=1, description="Share of request images that repeat an earlier image of "
        "the trace (seeded; fresh images are then all distinct) [default: --unique-images "
        "payloads in turn].",
    )  # fmt: skip
    requests_file: Path | None = Field(
        None, description="JSONL request file: one OpenAI chat body per line (images as data "
        "URLs, file paths or http URLs; prompt; max_tokens; optional timestamp in seconds).",
    )  # fmt: skip
    replay_timestamps: bool = Field(
        False, description="Send a --requests-file's requests at their own timestamps (in "
        "their order, once) instead of --request-rate; the rate shown is the trace's mean.",
    )  # fmt: skip
    prompt: str | None = Field(None, description="Prompt text of every request [default: "
                               "'Describe the image.'].")  # fmt: skip
    input_len: int | None = Field(
        None, ge=1, le=1_000_000, description="Prompt of about this many text tokens instead "
        "of --prompt (sglang.bench_serving's and vllm bench serve's --random-input-len).",
    )  # fmt: skip

    @field_validator("image_sizes")
    @classmethod
    def _sizes(cls, v: str | None) -> str | None:
        if v is not None:
            parse_sizes(v, _no_folder)
        return v

    @field_validator("image_format")
    @classmethod
    def _formats(cls, v: str) -> str:
        parse_formats(v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _count_mix(cls, data: Any) -> Any:
        """``images_per_request = "1-4"`` (or weights) lands in ``image_count_mix``;
        ``images_per_request`` keeps the largest count (what the arena is sized for)."""
        if not isinstance(data, dict):
            return data
        for key in ("images_per_request", "image_count"):
            v = data.get(key)
            if isinstance(v, str) and not v.strip().isdigit():
                data = dict(data)
                mix = parse_counts(v)
                data["image_count_mix"] = v.strip()
                data[key] = max(mix.values)
        if data.get("image_count_mix") is not None:
            parse_counts(data["image_count_mix"])
        return data

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadOptions:
        sources = (("--images", self.images), ("--image-sizes", self.image_sizes),
                   ("--requests-file", self.requests_file))  # fmt: skip
        given = [name for name, v in sources if v is not None]
        if len(given) > 1:
            raise WorkloadError(f"give one of {', '.join(given)}: each is a whole workload")
        if self.replay_timestamps and self.requests_file is None:
            raise WorkloadError("--replay-timestamps replays a --requests-file's timestamps")
        if self.prompt is not None and self.input_len is not None:
            raise WorkloadError("give --prompt or --input-len, not both")
        return self


class RequestShapeOptions(_Options):
    ignore_eos: bool = Field(
        False, description="Send ignore_eos: true, so servers that honour it generate exactly "
        "--max-tokens (on by default in sglang.bench_serving; vllm bench serve's --ignore-eos).",
    )  # fmt: skip
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="JSON object merged into every request body (vllm "
        "bench serve's --extra-body, sglang.bench_serving's --extra-request-body), e.g. "
        "'{\"top_k\": 1}'.",
    )  # fmt: skip
    headers: tuple[str, ...] = Field(
        (), description="HTTP header K:V sent with every request (repeatable; vllm bench "
        "serve's --header).",
    )  # fmt: skip
    flush_cache: bool = Field(
        False, description="POST /flush_cache to each --endpoint after the warm-up, before "
        "each measured trace (sglang.bench_serving's --flush-cache), so that every arm and "
        "rate starts with the server's caches empty; the emulator's servers are always "
        "flushed.",
    )  # fmt: skip
    image_transport: ImageTransport = Field(
        "base64", description="base64 data URLs in the body, or url: http URLs of a loopback "
        "file server the run starts and stops (the server fetches each image).",
    )  # fmt: skip

    @field_validator("extra_body", mode="before")
    @classmethod
    def _extra(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--extra-body is not JSON: {exc}") from None
        if not isinstance(v, dict):
            raise ValueError("--extra-body must be a JSON object")
        return v

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for h in v:
            key, sep, _ = h.partition(":")
            if not sep or not key.strip() or any(c in key for c in " \t\r\n"):
                raise ValueError(f"bad --header {h!r}: expected KEY:VALUE")
        return v

    @property
    def header_map(self) -> dict[str, str]:
        return {k.strip(): val.strip() for k, _, val in (h.partition(":") for h in self.headers)}


class CapacityOptions(_Options):
    capacity: bool = Field(
        False, description="Find each arm's capacity: the highest request rate whose goodput "
        "meets --goodput (bisection between --capacity-min-rate and --capacity-max-rate to "
        "--capacity-resolution), instead of the fixed --request-rate list.",
    )  # fmt: skip
    capacity_min_rate: float = Field(0.5, gt=0, le=MAX_RATE, description="Lowest rate tried "
                                     "(req/s).")  # fmt: skip
    capacity_max_rate: float = Field(64.0, gt=0, le=MAX_RATE, description="Highest rate tried "
                                     "(req/s).")  # fmt: skip
    capacity_resolution: float = Field(
        0.1, gt=0, le=1, description="Stop bisecting when the bracket is narrower than this "
        "fraction of its upper end.",
    )  # fmt: skip
    capacity_goodput_share: float = Field(
        0.9, gt=0, le=1, description="A rate meets the SLOs when this share of its requests "
        "meets every --goodput SLO and first tokens keep 90% of the arrivals' pace.",
    )  # fmt: skip

    @model_validator(mode="after")
    def _bracket(self) -> CapacityOptions:
        if self.capacity and self.capacity_min_rate >= self.capacity_max_rate:
            raise ValueError("--capacity-min-rate must be below --capacity-max-rate")
        return self
