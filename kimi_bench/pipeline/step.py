"""What one arm's pipeline holds in one process (``Step``: configuration, device, copy
ledger, timing hook, arena) and what a rank holds after its step (``RankOutput``); the
types every step function and the gather share."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.decoders import DecoderChoice, choose
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.materialize import MaterializedBatch
from kimi_bench.domain.runtime import RuntimeProfile, get_profile
from kimi_bench.domain.stages import STAGES
from kimi_bench.pipeline.arena import Arena
from kimi_bench.pipeline.preprocess_cache import PreprocessCache

__all__ = ["STAGES", "ArmLike", "CarrierLike", "ClockHook", "Hook", "NoHook", "RankOutput", "Step"]

CPU_STAND_IN = " [no CUDA: host copy stands in]"


class Hook(Protocol):
    def mark(self, stage: str) -> None: ...


class ArmLike(Protocol):
    """What a step's arm is and does (``pipeline.arms.Arm``, whose module imports this one;
    its class attributes declare the rest)."""

    name: str

    @property
    def role(self) -> Any: ...
    @property
    def in_process(self) -> bool: ...
    @property
    def proposed(self) -> bool: ...
    @property
    def encoded_inputs(self) -> bool: ...
    def load(self, step: Step, data: bytes) -> Any: ...
    def model_class(self, preset: str, baseline_whitelisted: bool) -> str: ...
    def decide(
        self,
        step: Step,
        images: Sequence[Any],
        plans: Sequence[Any],
        *,
        scope: Any = None,
        owner_can_materialize: bool = True,
    ) -> Any: ...
    def produce(self, step: Step, images: Sequence[Any], plans: Any, decisions: Any) -> Any: ...
    def pack(self, step: Step, items: Any, prefix: str) -> Any: ...
    def rank_step(
        self,
        step: Step,
        items: Any,
        rank: int,
        world: int,
        decode_errors: list[tuple[int, str]] | None = None,
    ) -> RankOutput: ...


class CarrierLike(Protocol):
    """What a step's carrier does (``pipeline.carriers.Carrier``)."""

    name: str

    @property
    def broadcasts_in_turn(self) -> bool: ...
    @property
    def ipc_mirrors(self) -> str: ...

    def prepare(self) -> None: ...
    def wrap(self, step: Step, items: Any, prefix: str) -> Any: ...
    def encode(self, step: Step, payload: Any) -> list[Any]: ...
    def decode(self, step: Step, get: Callable[[], Any], stage: str, mirrors: str) -> Any: ...
    def broadcast(self, step: Step, obj: Any, rank: int, world: int, group: Any = None) -> Any: ...
    def take(self, step: Step, packed: Any) -> tuple[Any, list[str]]: ...
    def holds_segments(self, packed: Any) -> bool: ...


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
    """One arm's pipeline in one process: the arm and carrier objects, configuration,
    device, ledger, timing hook and the recipe steps it has run (``trail``). Made by
    ``recipe.Chosen.step`` (``recipe.make_step`` for a single step)."""

    arm: ArmLike
    carrier: CarrierLike
    cfg: PreprocessConfig
    device: torch.device
    profile: RuntimeProfile = field(default_factory=lambda: get_profile(None))
    ledger: Ledger = field(default_factory=Ledger)
    hook: Hook = field(default_factory=NoHook)
    arena: Arena | None = None  # zero-copy arm: this process's mapping of the run's arena
    # how this process decodes an encoded input (``domain.decoders.choose``: the runtime
    # profile's decoder on CUDA, PIL without); every decode is listed in ``decodes``
    decoder: DecoderChoice = field(
        default_factory=lambda: choose("auto", get_profile(None), torch.device("cpu"))
    )
    # the eager baseline's model class is on the pre-embed whitelist (the same runtime with
    # deferral off) rather than the runtime before the change (not whitelisted)
    baseline_whitelisted: bool = False
    # the producer's preprocess cache (a runtime arm under a profile with it on; else None)
    cache: PreprocessCache | None = None
    load_keys: dict[int, bytes] = field(default_factory=dict)  # id(loaded image) -> its key
    trail: list[str] = field(default_factory=list)  # recipe steps, in the order they ran
    decodes: list[tuple[str, str]] = field(default_factory=list)  # (decoder, why) per input

    @property
    def model_class(self) -> str:
        return self.arm.model_class(self.cfg.name, self.baseline_whitelisted)

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
    # deferred-decode: (batch item index, (decoder, why)) of each of the owner's decodes
    decoded: list[tuple[int, tuple[str, str]]] = field(default_factory=list)
    # every rank ran every image (vLLM's encoder TP mode ``weights``): nothing to gather
    replicated: bool = False

    @property
    def patches(self) -> int:
        return 0 if self.tower is None else int(self.tower.shape[0])
