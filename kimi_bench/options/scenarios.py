"""One typed options model per scenario (parity, micro; serve-ab's is in ``serve_ab``);
what they share is in ``common``.

Each field has its default, allowed values, unit (in the name or the description) and a
one-line description here and nowhere else: the CLI options are generated from these
models (``kimi_bench.cli.build``), scenario files are validated by them (unknown keys are
errors), the workers are configured from them and the report's ``config`` is their dump.
Defaults that depend on the machine are ``None`` here and resolved once by
``base.resolve_defaults`` from ``MACHINE_DEFAULTS``; the report says which profile was used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from kimi_bench.options.base import (
    MAX_RANKS,
    MAX_TIMEOUT_S,
    Arm,
    Content,
    FaultHooksSpec,
    Launcher,
    MicroCarrier,
)
from kimi_bench.options.common import _Common, _folder, _RunsArms, check_reference
from kimi_bench.options.parse import (
    IMAGE_SPEC_RE,
    _split_list,
    distinct_arms,
    parse_image_spec,
)

# ------------------------------------------------------------------------------ shared

# What a scenario file may write for the fields parsed from text (JSON Schema of the file).
_LIST_SCHEMA = WithJsonSchema(
    {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
)
Ranks = Annotated[int, Field(ge=1, le=MAX_RANKS, description="Scheduler (TP) ranks.")]
MachineRanks = Annotated[
    int | None, Field(ge=1, le=MAX_RANKS, description="Scheduler (TP) ranks [GPU: 8, CPU: 2].")
]


class ParityOptions(_Common):
    images: Path | None = Field(
        None, description="Folder of your inputs (PIL images, .pt/.npy tensors); "
        "default: the built-in corpus."
    )  # fmt: skip
    _images = field_validator("images")(_folder())
    ranks: Ranks = 2
    policy: Literal["request", "image"] | None = Field(
        None, description="Override the runtime's decision scope (request or image)."
    )
    images_per_request: int = Field(1, ge=1, le=64, description="Images per request.")
    batch_size: int = Field(4, ge=1, le=1024, description="Requests per forward batch.")
    max_pixels: int = Field(
        100_000_000, ge=1, le=2**31, description="Refuse inputs with more pixels (bomb guard)."
    )
    dump: Path | None = Field(None, description="Write DIR/<name>.pt with both arms' FP32.")
    reference: Literal["pil", "sglang", "vllm", "none"] = Field(
        "pil",
        description="pil: distance to a PIL reference; sglang: compare with the installed "
        "SGLang runtime's own functions; vllm (with --runtime vllm-0.33): with the installed "
        "vLLM's own K3 processor (scripts/vllm-env.sh); none.",
    )
    follow_links: bool = Field(False, description="Follow symlinks that leave the folder.")

    @model_validator(mode="after")
    def _reference_of_the_runtime(self) -> ParityOptions:
        return check_reference(self)


class MicroOptions(_RunsArms):
    synthetic: str = Field(
        "4x1536x1024",
        description="Generated images COUNTxWIDTHxHEIGHT (width first, like PIL), "
        "comma-separated for mixes.",
    )
    images: Path | None = Field(
        None, description="Folder of your images to use instead of --synthetic (the older "
        "COUNTxWxH form is still read as --synthetic).",
    )  # fmt: skip
    _images = field_validator("images")(
        _folder(" (for generated images use --synthetic COUNTxWIDTHxHEIGHT, e.g. 4x1536x1024)")
    )
    ranks: MachineRanks = None
    transport: MicroCarrier = Field(
        "shm",
        description="shm (one node) or pickle (inline bytes); sglang-shm / sglang-pickle "
        "run the installed SGLang runtime's own carrier functions instead "
        "(scripts/sglang-env.sh); vllm-mq: vLLM 0.33's (--runtime vllm-0.33, its default).",
    )
    arms: Annotated[tuple[Arm, ...], _LIST_SCHEMA] = Field(
        ("eager", "deferred"), description="Arms to run (--runtime vllm-0.33: vllm-uint8)."
    )
    content: Content = Field("random", description="random (seeded), blank or photo.")
    repeat_share: float = Field(0.0, ge=0.0, le=1.0, description="Share of the request's "
                                "images that repeat an earlier one (seeded; the first never "
                                "does): sglang-0.5.23's preprocess cache hits them.")  # fmt: skip
    repeats: int | None = Field(None, ge=1, le=10_000, description="Measured repeats "
                                "[GPU: 20, CPU: 5].")  # fmt: skip
    warmup: int | None = Field(None, ge=0, le=1_000, description="Unmeasured repeats first "
                               "[GPU: 3, CPU: 1].")  # fmt: skip
    launches: int = Field(3, ge=1, le=100, description="Independent process launches, one "
                          "after another, each with fresh processes, its --warmup and its "
                          "--repeats (and --control-repeats): the speedup's interval is "
                          "where a re-run's median falls, from the spread between launches "
                          "and within them (1: a within-launch CI that promises nothing "
                          "about a re-run).")  # fmt: skip
    control_repeats: int = Field(3, ge=0, le=1_000, description="Rounds of every arm on a "
                                 "minimal payload (one merged token per image), spread over "
                                 "the repeats: the control plane, subtracted to give each "
                                 "arm's payload cost; 0 disables.")  # fmt: skip
    timeout_s: float = Field(300.0, gt=0, le=MAX_TIMEOUT_S, description="Fail when no "
                             "worker reports for this many seconds.")  # fmt: skip
    launcher: Launcher = Field("auto", description="spawn: kimi-bench starts every process on "
                               "this host; torchrun: started by torchrun on every node; auto: "
                               "torchrun when its environment is set.")  # fmt: skip
    profile: Path | None = Field(
        None, description="Write torch profiler traces (Chrome trace JSON, stages as "
        "stage:<name> ranges) of the producer and each rank into this folder, from "
        "--profile-repeats extra repeats of every arm after the measured ones (not in the "
        "statistics: the profiler's overhead stays out of them).",
    )  # fmt: skip
    profile_repeats: int = Field(2, ge=1, le=100, description="Extra repeats of every arm "
                                 "run under the profiler with --profile.")  # fmt: skip
    fault_hooks: FaultHooksSpec = None

    _arms = field_validator("arms", mode="before")(_split_list)

    @field_validator("arms")
    @classmethod
    def _distinct_arms(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        """Each arm is measured against eager once: an arm given twice is a mistake."""
        return distinct_arms(v)

    @field_validator("synthetic")
    @classmethod
    def _spec(cls, v: str) -> str:
        parse_image_spec(v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _old_images_spec(cls, data: Any) -> Any:
        """``images = "2x640x480"`` (the older spelling) means ``synthetic``."""
        images = data.get("images") if isinstance(data, dict) else None
        if isinstance(images, (str, Path)) and IMAGE_SPEC_RE.match(str(images).split(",")[0]):
            data = dict(data)
            if "synthetic" in data:
                raise ValueError("give synthetic or an images spec, not both")
            data["synthetic"] = str(data.pop("images"))
        return data

    @property
    def groups(self) -> tuple[tuple[int, int, int], ...]:
        return parse_image_spec(self.synthetic)
