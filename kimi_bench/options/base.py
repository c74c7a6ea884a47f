"""The names, bounds and machine-dependent defaults every command's options share, the
options' base model and how a validation error is told (naming the option or the scenario
key). Choice names live here as ``Literal`` types: the CLI's choices, the scenario schema and
the report's config all come from them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kimi_bench.domain.runtime import DEFAULT_RUNTIME

__all__ = ["DEFAULT_RUNTIME"]

Preset = Literal["kimi-k3", "kimi-k2.5"]
Device = Literal["auto", "cpu", "cuda"]
Runtime = Literal["sglang-0.5.23", "pr-33921", "vllm-0.33"]
EncoderTpMode = Literal["weights", "data"]
Carrier = Literal["shm", "pickle", "vllm-mq"]
# micro also runs the installed SGLang runtime's own carrier functions (kimi_bench.sglang_ref)
# and vLLM 0.33's carriers (vllm-mq: msgpack/ZMQ, then the MessageQueue ring or ZMQ)
MicroCarrier = Literal["shm", "pickle", "sglang-shm", "sglang-pickle", "vllm-mq"]
# carriers that live in a module of their own, which registers them with the pipeline's
# carrier registry (``pipeline.carriers``) when the registry imports it on first use
CARRIER_MODULES: dict[str, str] = {
    "sglang-shm": "kimi_bench.sglang_ref.carriers",
    "sglang-pickle": "kimi_bench.sglang_ref.carriers",
    "vllm-mq": "kimi_bench.pipeline.carriers.vllm_mq",
}
Arm = Literal["eager", "deferred", "zero-copy", "deferred-decode", "vllm-uint8"]
# the arms `kimi-bench ab` runs and gates: the deferred arm's time and its speedup over eager
AB_ARMS: tuple[Arm, Arm] = ("eager", "deferred")
# arms that live in a module of their own, which registers them with the pipeline's arm
# registry (``pipeline.arms``) when the registry imports it on first use (the built-in arms
# are registered by the registry itself)
ARM_MODULES: dict[str, str] = {}
Content = Literal["random", "blank", "photo"]
# how JPEGs are decoded (``kimi_bench.domain.decoders``; auto: as the runtime profile does
# on the device: PIL without CUDA)
DecoderName = Literal["auto", "pil", "nvimgcodec", "nvjpeg"]
EagerBaseline = Literal["pre-change", "deferral-off"]
Launcher = Literal["auto", "spawn", "torchrun"]

MAX_RANKS = 64  # one process per rank on one host: beyond this use torchrun across nodes
MAX_RATE = 1e6  # requests/s; "inf" sends everything at once
MAX_TIMEOUT_S = 86_400.0
RESOLUTION_PRESETS = {
    "720p": (1280, 720),
    "1080p": (1920, 1080),
    "1440p": (2560, 1440),
    "4k": (3840, 2160),
}  # fmt: skip  (width, height)

# Machine-dependent defaults: the PR shape on a GPU; a CPU profile that finishes within
# a few minutes on a 2-core machine (issue: "defaults that fit the machine").
MACHINE_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "cuda": {
        "micro": {"ranks": 8, "repeats": 20, "warmup": 3},
        "serve_ab": {"ranks": 8, "requests": 200, "resolution": (1536, 1024)},
    },
    "cpu": {
        "micro": {"ranks": 2, "repeats": 5, "warmup": 1},
        "serve_ab": {"ranks": 2, "requests": 16, "resolution": (640, 480)},
    },
}


# the carrier between processes for serve-ab and kimi-bench serve
CarrierField = Annotated[
    Carrier,
    Field(
        description="shm (one node) or pickle (inline bytes); vllm-mq: vLLM 0.33's "
        "(--runtime vllm-0.33, its default)."
    ),
]
# The fault hooks a test injects (kimi_bench.infra.fault_hooks), named as module:Class[:key=value,
# ...] and loaded once when the run starts (fault_hooks.load_hooks); real runs leave it None.
# A hidden option ("Tests only" hides it from --help) rather than an environment variable:
# it is checked like every other option, and serve-ab hands it on explicitly to the
# emulator servers it starts, while an environment variable would reach every process
# under a test, whichever command it runs.
FaultHooksSpec = Annotated[
    str | None,
    Field(
        description="Tests only: the FaultHooks class to run with (module:Class[:key=value,...]).",
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*(:.*)?$",
    ),
]


class OptionsError(ValueError):
    """Options that cannot be used; the message names the option or scenario key."""


class _Options(BaseModel):
    # defer_build: a model's validator is built when first used, not at import, so a
    # command's start-up (--help, the CLI's option table) pays only for its own model
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    @field_validator("*")
    @classmethod
    def _utf8_text(cls, v: Any) -> Any:
        """Text an option carries into reports (a note, a metadata value, a model name) is
        UTF-8: bytes that are not (a shell's ``$'\\xff'``) are refused here, not when the
        report is written. Paths may be any bytes (they are file names)."""
        texts = (v,) if isinstance(v, str) else v if isinstance(v, tuple | list) else ()
        if isinstance(v, dict):
            texts = (*v.keys(), *v.values())
        for t in texts:
            if isinstance(t, str) and not t.isascii():
                try:
                    t.encode("utf-8")
                except UnicodeEncodeError:
                    shown = t.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                    raise ValueError(f"'{shown}' is not valid UTF-8 text") from None
        return v


def describe_error(
    exc: Any, source: str, flag_names: bool = True, flags: dict[str, Any] | None = None
) -> str:
    """One line per problem, naming the option (``--ranks``; ``flags`` maps a field to the
    flags it is given by, e.g. rates -> --request-rate/--rates) or the scenario key."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"] if not isinstance(x, int))
        key = f"--{loc.replace('_', '-')}" if flag_names and loc else (loc or "(options)")
        if flag_names and loc in (flags or {}):
            key = "/".join((flags or {})[loc])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown option (not a field of this scenario)"
        lines.append(f"{source}{key}: {msg}")
    return "; ".join(lines)


def resolve_defaults(opts: Any, kind: str, device_type: str) -> tuple[Any, str]:
    """Fill the machine-dependent ``None`` fields; returns (options, profile name)."""
    profile = "cuda" if device_type == "cuda" else "cpu"
    fill = {
        k: v
        for k, v in MACHINE_DEFAULTS[profile].get(kind, {}).items()
        if getattr(opts, k, 0) is None
    }
    return (opts.model_copy(update=fill) if fill else opts), profile
