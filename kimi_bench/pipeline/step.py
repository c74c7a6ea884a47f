"""What one arm's pipeline holds in one process (``Step``: configuration, device, copy
ledger, timing hook, arena) and what a rank holds after its step (``RankOutput``); the
types every step function and the gather share."""

from __future__ import annotations

import time
import typing
from dataclasses import dataclass, field
from typing import Protocol

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.materialize import MaterializedBatch
from kimi_bench.domain.runtime import RuntimeProfile, get_profile
from kimi_bench.domain.scheduler import PRESET_MODEL_CLASS
from kimi_bench.domain.stages import STAGES
from kimi_bench.options import Arm
from kimi_bench.pipeline.arena import Arena

ARMS: tuple[str, ...] = typing.get_args(Arm)
__all__ = ["ARMS", "STAGES", "ClockHook", "Hook", "NoHook", "RankOutput", "Step"]

CPU_STAND_IN = " [no CUDA: host copy stands in]"
# The eager baseline is the scheduler before the change: its model class is not whitelisted.
EAGER_MODEL_CLASS = "EagerBaselineModel"
DEFERRED_MODEL_CLASS = "KimiK3ForConditionalGeneration"


class Hook(Protocol):
    def mark(self, stage: str) -> None: ...


class NoHook:
    def mark(self, stage: str) -> None:
        return None


@dataclass
class ClockHook:
    """``time.perf_counter`` at each mark, after a CUDA synchronize of ``device``."""

    device: torch.device
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, stage: str) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.marks[stage] = time.perf_counter()


@dataclass
class Step:
    """One arm's pipeline in one process: configuration, device, ledger and timing hook."""

    arm: str
    cfg: PreprocessConfig
    device: torch.device
    profile: RuntimeProfile = field(default_factory=lambda: get_profile(None))
    ledger: Ledger = field(default_factory=Ledger)
    hook: Hook = field(default_factory=NoHook)
    arena: Arena | None = None  # zero-copy arm: this process's mapping of the run's arena

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"unknown arm {self.arm!r}; expected one of {', '.join(ARMS)}")

    @property
    def model_class(self) -> str:
        if self.arm == "eager":
            return EAGER_MODEL_CLASS
        return PRESET_MODEL_CLASS.get(self.cfg.name, DEFERRED_MODEL_CLASS)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"


@dataclass
class RankOutput:
    """What one rank holds after its step: owners of every image, its own image indices,
    their FP32 ``pixel_values`` and the BF16 tower buffer (on its device)."""

    owners: list[int]
    mine: list[int]
    batch: MaterializedBatch | None
    tower: torch.Tensor | None
    sizes: list[int] = field(default_factory=list)  # patches per image, input order
    decode_ms: float = 0.0  # deferred-decode: the owner's decode + staging (in owner_h2d)

    @property
    def patches(self) -> int:
        return 0 if self.tower is None else int(self.tower.shape[0])
