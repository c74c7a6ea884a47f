"""The two pipelines end to end, in one process: producer -> carrier -> ranks -> owner.

``EagerArm``: the producer materializes FP32 patches on its device and copies them to the
host; the scheduler moves every item to every rank's device; the owner casts its images.
``DeferredArm``: the producer plans and stages uint8 (per the policy); the scheduler skips
the pre-embed move; only the owner copies uint8 to its device and materializes.

Ranks are emulated in turn here (parity only needs the owner's arithmetic); ``bench.micro``
and ``bench.serve`` run the same steps in real processes.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kimi_bench.config import PreprocessConfig
from kimi_bench.contract import (
    DEFERRED_KEY,
    GRID_KEY,
    MMItem,
    grid_tensor,
    make_deferred_record,
)
from kimi_bench.materialize import materialize, materialize_items, to_tower_buffer
from kimi_bench.navit import ResizePlan
from kimi_bench.pixels import stage_input
from kimi_bench.policy import Decision, PolicyMode, decide_images
from kimi_bench.scheduler import (
    PRESET_MODEL_CLASS,
    assign_owners,
    images_of_rank,
    needs_pre_embed_move,
)

# The eager baseline is the scheduler *before* the change: the model is not whitelisted,
# so every rank moves every item. The deferred arm uses the preset's (whitelisted) class.
EAGER_MODEL_CLASS = "EagerBaselineModel"
DEFERRED_MODEL_CLASS = "KimiK3ForConditionalGeneration"


def eager_item(obj: Any, plan: ResizePlan, cfg: PreprocessConfig, device: torch.device) -> MMItem:
    """Producer work of the eager path: stage, materialize on ``device``, copy to host."""
    chw = stage_input(obj, cfg, require_uint8=False)
    batch = materialize([chw], [plan], cfg, device)
    return MMItem(batch.pixel_values.cpu(), {GRID_KEY: grid_tensor(plan)})


def deferred_item(obj: Any, plan: ResizePlan, cfg: PreprocessConfig) -> MMItem:
    """Producer work of the deferred path: stage CHW uint8 on the CPU plus the record."""
    chw = stage_input(obj, cfg, require_uint8=True)
    return MMItem(
        chw,
        {GRID_KEY: grid_tensor(plan), DEFERRED_KEY: make_deferred_record(plan, cfg)},
    )


@dataclass
class OwnerOutput:
    """What the owner of each image holds after the arm ran (all on the CPU)."""

    fp32: list[torch.Tensor]
    bf16: list[torch.Tensor]
    owners: list[int]
    carried_bytes: int
    decisions: list[Decision] = field(default_factory=list)


def _carry(items: list[MMItem]) -> tuple[list[MMItem], int]:
    """The inline pickle carrier (what multi-node CPU transport does)."""
    blob = pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.loads(blob), len(blob)


def _owner_stage(
    items: list[MMItem],
    cfg: PreprocessConfig,
    n_ranks: int,
    device: torch.device,
    model_class: str,
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[int]]:
    sizes = [it.num_patches for it in items]
    owners = assign_owners(sizes, n_ranks)
    fp32: list[torch.Tensor | None] = [None] * len(items)
    bf16: list[torch.Tensor | None] = [None] * len(items)
    pre_embed = needs_pre_embed_move(model_class)
    for rank in range(n_ranks):
        # the pre-embed move: every rank copies every item to its device, used or not
        moved = (
            [
                MMItem(it.feature.to(device, non_blocking=True), it.model_specific_data)
                for it in items
            ]
            if pre_embed
            else items
        )
        mine = images_of_rank(owners, rank)
        if not mine:
            continue
        rank_items = [moved[i] for i in mine]
        batch = materialize_items(rank_items, cfg, device)
        buffer = to_tower_buffer(batch.split(), torch.bfloat16)
        counts = batch.patch_counts()
        for j, (pv, bf) in enumerate(zip(batch.split(), torch.split(buffer, counts), strict=True)):
            fp32[mine[j]] = pv.cpu()
            bf16[mine[j]] = bf.cpu()
    return (
        [t for t in fp32 if t is not None],
        [t for t in bf16 if t is not None],
        owners,
    )


def run_eager(
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    cfg: PreprocessConfig,
    n_ranks: int,
    producer_device: torch.device,
    rank_device: torch.device,
) -> OwnerOutput:
    items = [eager_item(o, p, cfg, producer_device) for o, p in zip(inputs, plans, strict=True)]
    carried, nbytes = _carry(items)
    fp32, bf16, owners = _owner_stage(carried, cfg, n_ranks, rank_device, EAGER_MODEL_CLASS)
    return OwnerOutput(fp32, bf16, owners, nbytes)


def run_deferred(
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    cfg: PreprocessConfig,
    n_ranks: int,
    producer_device: torch.device,
    rank_device: torch.device,
    *,
    policy: PolicyMode = "request",
    images_per_request: int = 1,
    owner_can_materialize: bool = True,
) -> OwnerOutput:
    decisions: list[Decision] = []
    for start in range(0, len(inputs), images_per_request):
        sl = slice(start, start + images_per_request)
        decisions += decide_images(
            inputs[sl], plans[sl], mode=policy, owner_can_materialize=owner_can_materialize
        )
    items = [
        deferred_item(o, p, cfg) if d.defer else eager_item(o, p, cfg, producer_device)
        for o, p, d in zip(inputs, plans, decisions, strict=True)
    ]
    carried, nbytes = _carry(items)
    fp32, bf16, owners = _owner_stage(
        carried, cfg, n_ranks, rank_device, PRESET_MODEL_CLASS.get(cfg.name, DEFERRED_MODEL_CLASS)
    )
    return OwnerOutput(fp32, bf16, owners, nbytes, decisions)
