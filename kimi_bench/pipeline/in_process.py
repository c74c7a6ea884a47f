"""The pipeline in one process (``parity``): producer -> inline pickle -> each rank in
turn -> the owners' outputs in input order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.policy import Decision, PolicyMode, processed_bytes
from kimi_bench.domain.runtime import get_profile
from kimi_bench.pipeline.arena_layout import ArenaError
from kimi_bench.pipeline.gather import gather as gather  # the encoder-output gather step
from kimi_bench.pipeline.steps import (
    Step,
    decide,
    deserialize,
    produce,
    rank_step,
    serialize,
    wrap,
)

# ------------------------------------------------------------------ in one process (parity)


@dataclass
class OwnerOutput:
    """What the owner of each image holds after the arm ran (all on the CPU)."""

    fp32: list[torch.Tensor]
    bf16: list[torch.Tensor]
    owners: list[int]
    carried_bytes: int
    decisions: list[Decision] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)


def run_in_process(
    step: Step,
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    n_ranks: int,
    rank_device: torch.device,
    *,
    decisions: Sequence[Decision],
) -> OwnerOutput:
    """Producer -> inline pickle -> each rank in turn (its own unpickled copy, as after the
    broadcast) -> owners' outputs in input order."""
    if step.arm == "zero-copy":
        raise ArenaError("the zero-copy arm runs in real processes (micro, serve-ab) only")
    items = produce(step, list(inputs), list(plans), list(decisions))
    blob = serialize(step, wrap(step, items, "pickle", ""), "serialize", "send_pyobj")
    fp32: list[torch.Tensor | None] = [None] * len(items)
    bf16: list[torch.Tensor | None] = [None] * len(items)
    owners: list[int] = []
    rank_step_ = Step(step.arm, step.cfg, rank_device, step.profile, step.ledger)
    for rank in range(n_ranks):
        mine_items = deserialize(step, blob, "to_rank0" if rank == 0 else "broadcast", "loads")
        out = rank_step(rank_step_, mine_items, rank, n_ranks)
        owners = out.owners
        if out.batch is None or out.tower is None:
            continue
        counts = out.batch.patch_counts()
        for j, (pv, bf) in enumerate(
            zip(out.batch.split(), torch.split(out.tower, counts), strict=True)
        ):
            fp32[out.mine[j]] = pv.cpu()
            bf16[out.mine[j]] = bf.cpu()
    return OwnerOutput(
        [t for t in fp32 if t is not None],
        [t for t in bf16 if t is not None],
        owners,
        len(blob),
        list(decisions),
        step.ledger,
    )


def _request_decisions(
    step: Step,
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    images_per_request: int,
    scope: PolicyMode | None,
    owner_can_materialize: bool,
) -> list[Decision]:
    out: list[Decision] = []
    for start in range(0, len(inputs), images_per_request):
        sl = slice(start, start + images_per_request)
        out += decide(
            step, inputs[sl], plans[sl], scope=scope, owner_can_materialize=owner_can_materialize
        )
    return out


def run_arm(
    arm: str,
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    cfg: PreprocessConfig,
    n_ranks: int,
    producer_device: torch.device,
    rank_device: torch.device,
    *,
    runtime: str | None = None,
    policy: PolicyMode | None = None,
    images_per_request: int = 1,
    owner_can_materialize: bool = True,
) -> OwnerOutput:
    step = Step(arm, cfg, producer_device, get_profile(runtime))
    decisions = _request_decisions(
        step, inputs, plans, images_per_request, policy, owner_can_materialize
    )
    return run_in_process(step, inputs, plans, n_ranks, rank_device, decisions=decisions)


def run_eager(
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    cfg: PreprocessConfig,
    n_ranks: int,
    producer_device: torch.device,
    rank_device: torch.device,
    **kw: Any,
) -> OwnerOutput:
    return run_arm("eager", inputs, plans, cfg, n_ranks, producer_device, rank_device, **kw)


def run_deferred(
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    cfg: PreprocessConfig,
    n_ranks: int,
    producer_device: torch.device,
    rank_device: torch.device,
    **kw: Any,
) -> OwnerOutput:
    return run_arm("deferred", inputs, plans, cfg, n_ranks, producer_device, rank_device, **kw)


def eager_item(obj: Any, plan: ResizePlan, cfg: PreprocessConfig, device: torch.device) -> MMItem:
    """One image through the eager producer (FP32 patches on the host)."""
    step = Step("eager", cfg, device)
    return produce(step, [obj], [plan], decide(step, [obj], [plan]))[0]


def deferred_item(obj: Any, plan: ResizePlan, cfg: PreprocessConfig) -> MMItem:
    """One image through the deferred producer, deferred regardless of the policy."""
    step = Step("deferred", cfg, torch.device("cpu"))
    forced = Decision(True, "forced", 0, processed_bytes(plan))
    return produce(step, [obj], [plan], [forced])[0]


# ========================================== zero-copy arm: PROPOSED, NOT IN THE RUNTIME
# One copy of each deferred image's decoded pixels into an arena slot at the producer; an
# ``ArenaRef`` (slot, generation, offset, shape) is the item's feature in every pickle and
