"""What every scenario's options share: the pipeline's own settings (preset, config,
device, runtime, decoder, the eager arm's scheduler), the report's (seed, notes, metadata),
the ``--images`` folder check, and the stand-in costs of serve-ab and ``kimi-bench serve``.
The scenarios' models are in :mod:`kimi_bench.options.scenarios`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from kimi_bench.domain.runtime import DEFAULT_RUNTIME, runtime_spec
from kimi_bench.options.base import DecoderName, Device, EagerBaseline, Preset, Runtime, _Options
from kimi_bench.options.parse import _metadata


class _Pipeline(_Options):
    """What every command that runs the pipeline takes: preset, config, device, runtime."""

    preset: Preset = Field("kimi-k3", description="Preprocessing preset.")
    config: Path | None = Field(
        None,
        description="A checkpoint's preprocessor_config.json (keys under media_proc_cfg or "
        "top level); overrides --preset.",
    )
    device: Device = Field(
        "auto", description="auto (CUDA if present), cpu or cuda; on cpu the GPU is emulated."
    )
    runtime: Runtime = Field(
        DEFAULT_RUNTIME,
        description="Runtime behaviour to emulate: sglang-0.5.23 (shm receivers map "
        "copy-on-write, per-image decisions) or pr-33921 (receivers clone, per-request).",
    )
    decoder: DecoderName = Field(
        "auto",
        description="JPEG decoder: auto (as the runtime on this device: on CUDA nvimgcodec "
        "for sglang-0.5.23, nvjpeg for pr-33921; PIL without CUDA), pil, nvimgcodec "
        "(NVIDIA nvImageCodec, fancy upsampling) or nvjpeg (torchvision's decode_jpeg). "
        "Other formats, and a JPEG a GPU decoder cannot take, decode with PIL, as the runtime "
        "falls back.",
    )
    preprocess_cache: bool = Field(
        True,
        description="sglang-0.5.23's preprocess cache (its default: on): a repeated image "
        "skips decode, preprocessing and the feature hash; off: the identity is the encoded "
        "bytes' digest, no feature hash, per-request decisions. pr-33921 has none (ignored).",
    )
    eager_baseline: EagerBaseline = Field(
        "pre-change",
        description="The eager arm's scheduler: pre-change (the runtime before the change: "
        "the model class is not on the pre-embed whitelist, so every rank moves every item "
        "to its device) or deferral-off (the same runtime with deferral off: K3 whitelisted, "
        "no pre-embed move).",
    )

    @property
    def runtime_spec(self) -> str:
        """The runtime profile with its preprocess cache as asked (``get_profile`` takes it)."""
        return runtime_spec(self.runtime, self.preprocess_cache)


class _Common(_Pipeline):
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed for images and arrivals.")
    notes: tuple[str, ...] = Field((), description="Text added to the report's notes.")
    metadata: dict[str, str] = Field(
        default_factory=dict, description="KEY=VALUE pairs kept in the report (repeatable)."
    )

    _meta = field_validator("metadata", mode="before")(_metadata)


def _folder(hint: str = "") -> Any:
    """A validator: ``--images`` names an existing folder (checked when the options are
    built, before any work, so the mistake comes back in about a second)."""

    def check(v: Path | None) -> Path | None:
        if v is None or v.is_dir():
            return v
        why = "is not a folder" if v.exists() else "does not exist"
        raise ValueError(f"{v} {why}{hint}")

    return check


class StandinOptions(_Options):
    encoder_gflop_per_patch: float = Field(0.8, ge=0, le=1e4, description="Encoder stand-in "
                                           "GFLOP per patch (MoonViT-sized).")  # fmt: skip
    prefill_gflop_per_token: float = Field(6.0, ge=0, le=1e5, description="Prefill stand-in "
                                           "GFLOP per token, split over ranks.")  # fmt: skip
    decode_gflop_per_token: float = Field(6.0, ge=0, le=1e5, description="Decode stand-in "
                                          "GFLOP per output token after the first (one token "
                                          "per running request per step), split over "
                                          "ranks.")  # fmt: skip
    text_tokens_per_request: int = Field(128, ge=0, le=1_000_000, description="Text tokens.")
    cpu_flops_scale: float = Field(0.002, gt=0, le=1, description="Fraction of stand-in "
                                   "FLOPs run on CPU-only machines.")  # fmt: skip
