"""The pipeline in one process (``parity``): the recipe's producer step, the request
pickled inline, then the recipe's scheduler step on each rank in turn (each with its own
unpickled copy, as after the broadcast) -> the owners' outputs in input order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import kimi_bench.pipeline.recipe as recipe
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.decoders import DecoderChoice
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.policy import Decision, PolicyMode, processed_bytes
from kimi_bench.pipeline.arena_layout import ArenaError
from kimi_bench.pipeline.recipe import InTurn, make_step
from kimi_bench.pipeline.step import ArmLike, Step

# ------------------------------------------------------------------ in one process (parity)


@dataclass
class OwnerOutput:
    """What the owner of each image holds after the arm ran (all on the CPU)."""

    fp32: list[torch.Tensor]
    bf16: list[torch.Tensor]
    owners: list[int]
    decisions: list[Decision] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)
    trails: list[list[str]] = field(default_factory=list)  # the producer's, then each rank's


def run_in_process(
    step: Step,
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    n_ranks: int,
    rank_device: torch.device,
    *,
    decisions: Sequence[Decision],
    trails: list[list[str]] | None = None,
) -> OwnerOutput:
    """Producer -> inline pickle -> each rank in turn (its own unpickled copy, as after the
    broadcast) -> owners' outputs in input order. The ranks' steps are appended to
    ``trails`` (one list per rank) when given."""
    trails = trails if trails is not None else []
    if not step.arm.in_process:
        raise ArenaError(f"the {step.arm.name} arm runs in real processes (micro, serve-ab) only")
    produced = recipe.producer_step(step, list(inputs), "", plans=plans, decisions=decisions)
    frames: list[Any] = []
    recipe.send(step, produced.packed, frames.append, ipc=False)
    n_items = len(produced.items)
    fp32: list[torch.Tensor | None] = [None] * n_items
    bf16: list[torch.Tensor | None] = [None] * n_items
    owners: list[int] = []
    ranks = InTurn(n_ranks, frames)
    for rank in range(n_ranks):
        rank_step_ = make_step(
            step.arm, step.cfg, rank_device, carrier_=step.carrier, ledger=step.ledger,
            runtime=step.profile, decoder=_rank_decoder(step, rank_device),
            baseline_whitelisted=step.baseline_whitelisted,
        )  # fmt: skip
        mine = recipe.receive(rank_step_, iter(frames).__next__) if rank == 0 else None
        received = recipe.broadcast(rank_step_, ranks, mine, rank)
        out = recipe.scheduler_step(rank_step_, ranks, [received], rank).out
        trails.append(rank_step_.trail)
        owners = out.owners
        if out.tower is None:
            continue
        counts = [out.sizes[i] for i in out.mine]
        # a runtime that normalises on the device only (vLLM) has no FP32 pixel_values
        pvs = out.batch.split() if out.batch is not None else [None] * len(counts)
        for j, (pv, bf) in enumerate(zip(pvs, torch.split(out.tower, counts), strict=True)):
            if pv is not None:
                fp32[out.mine[j]] = pv.cpu()
            bf16[out.mine[j]] = bf.cpu()
    return OwnerOutput(
        [t for t in fp32 if t is not None],
        [t for t in bf16 if t is not None],
        owners,
        list(decisions),
        step.ledger,
        [step.trail, *trails],
    )


def _rank_decoder(step: Step, rank_device: torch.device) -> DecoderChoice | str:
    """The producer's decoder choice itself on the producer's device (a replayed choice
    then hands a rank the producer's one decode); the name to choose again elsewhere."""
    return step.decoder if rank_device == step.device else step.decoder.requested


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
        out += recipe.decide(
            step, inputs[sl], plans[sl], scope=scope, owner_can_materialize=owner_can_materialize
        )
    return out


def run_arm(
    arm: ArmLike | str,
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
    decoder: DecoderChoice | str = "auto",
    baseline_whitelisted: bool = False,
) -> OwnerOutput:
    """One arm over a corpus in this process (``decoder``: the name each device chooses,
    or the producer's choice, which ranks on the same device share)."""
    step = make_step(
        arm, cfg, producer_device, runtime=runtime, decoder=decoder,
        baseline_whitelisted=baseline_whitelisted,
    )  # fmt: skip
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
    step = make_step("eager", cfg, device)
    return recipe.producer_step(step, [obj], "", plans=[plan]).items[0]


def deferred_item(obj: Any, plan: ResizePlan, cfg: PreprocessConfig) -> MMItem:
    """One image through the deferred producer, deferred regardless of the policy."""
    step = make_step("deferred", cfg, torch.device("cpu"))
    forced = Decision(True, "forced", 0, processed_bytes(plan))
    return recipe.producer_step(step, [obj], "", plans=[plan], decisions=[forced]).items[0]
