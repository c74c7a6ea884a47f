"""What every scenario's options share: the pipeline's own settings (preset, config,
device, runtime, decoder, the eager arm's scheduler), the report's (seed, notes, metadata),
the ``--images`` folder check, and the stand-in costs of serve-ab and ``kimi-bench serve``.
The scenarios' models are in :mod:`kimi_bench.options.scenarios`."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Self, cast

from pydantic import Field, field_validator, model_validator

from kimi_bench.domain.runtime import DEFAULT_RUNTIME, VLLM, get_profile, runtime_spec
from kimi_bench.options.base import (
    DecoderName,
    Device,
    EagerBaseline,
    EncoderTpMode,
    Preset,
    Runtime,
    _Options,
)
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
        "copy-on-write, per-image decisions), pr-33921 (receivers clone, per-request) or "
        "vllm-0.33 (vLLM's K3 path: uint8 patches at the API server, every item to every "
        "rank; its arm is vllm, its carrier vllm-mq).",
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

    vllm_arena: bool = Field(
        False,
        description="vllm-0.33: the opt-in shared-memory tensor arena (vLLM #51207; tensors "
        "of 8 MiB or more copied once into a slot, readers map it).",
    )
    encoder_tp_mode: EncoderTpMode = Field(
        "weights",
        description="vllm-0.33's --mm-encoder-tp-mode: weights (every rank runs every image) "
        "or data (the greedy owners run theirs, then an all-gather).",
    )

    @model_validator(mode="after")
    def _runtime_options(self) -> _Pipeline:
        """vLLM's options only with a runtime that has them; vLLM decodes with PIL only."""
        profile = get_profile(self.runtime)
        profile.with_options(arena=self.vllm_arena, tp_mode=self.encoder_tp_mode)
        if profile.runtime == VLLM and self.decoder not in ("auto", profile.decoder):
            raise ValueError(
                f"--decoder {self.decoder}: {self.runtime}'s API server decodes with "
                f"{profile.decoder} only (no GPU decoder)"
            )
        return self

    @property
    def runtime_spec(self) -> str:
        """The runtime profile with its preprocess cache, and vLLM's arena and encoder TP
        mode, as asked (``get_profile`` takes it)."""
        return runtime_spec(
            self.runtime, self.preprocess_cache, arena=self.vllm_arena, tp_mode=self.encoder_tp_mode
        )


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


class _RunsArms(_Common):
    """What every scenario that runs arms over a carrier (``arms``, ``transport``: micro,
    serve-ab) checks of them against the runtime: under vllm-0.33 the arms and carrier not
    given are vLLM's; an arm or carrier the runtime does not have is refused, naming both
    (``endpoints``, real servers' arms, are not checked)."""

    @model_validator(mode="before")
    @classmethod
    def _runtime_defaults(cls, data: Any) -> Any:
        carriers = typing.get_args(cls.model_fields["transport"].annotation)
        return runtime_defaults(data, carriers)

    @model_validator(mode="after")
    def _runtime_has_arms(self) -> Self:
        if getattr(self, "endpoints", ()):
            return self
        values = cast("Any", self)
        get_profile(self.runtime).check_arms(values.arms, values.transport)
        return self


def runtime_defaults(data: Any, carriers: tuple[str, ...], arm_key: str = "arms") -> Any:
    """Under a runtime whose arms or carriers are not SGLang's (vllm-0.33), the arms and
    carrier not given are the runtime's own, where ``carriers`` (the scenario's) hold it
    (else its check names the carrier). ``arm_key`` "arm": one arm (``kimi-bench serve``)."""
    if not isinstance(data, dict):
        return data
    try:
        profile = get_profile(data.get("runtime") or DEFAULT_RUNTIME)
    except ValueError:
        return data  # the field's own validation names the mistake
    base = get_profile(DEFAULT_RUNTIME)
    if (profile.arms, profile.carriers) == (base.arms, base.carriers):
        return data  # the options' own defaults are this runtime's
    if profile.default_carrier not in carriers:
        return data  # the scenario cannot run it: its check says so
    out = dict(data)
    arms = list(profile.default_arms)
    out.setdefault(arm_key, arms if arm_key == "arms" else arms[0])
    out.setdefault("transport", profile.default_carrier)
    return out


def check_reference(opts: Any) -> Any:
    """A runtime's own code (``--reference sglang`` / ``vllm``) is the reference of that
    runtime's profiles only."""
    own = get_profile(opts.runtime).runtime
    if opts.reference in ("sglang", VLLM) and opts.reference != own:
        raise ValueError(
            f"--reference {opts.reference} holds the pipeline against {opts.reference}'s "
            f"own code: use it with a {opts.reference} --runtime, not {opts.runtime}"
        )
    return opts
