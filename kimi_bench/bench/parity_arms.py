"""Which arms ``parity`` runs, chosen from the registry by what each arm declares (never by
name): the baseline every other arm is held against, the change (the deferred columns),
the arm that takes encoded inputs (the ``decode_*`` columns, ``parity_decode``), and any
other arm that can run in one process (``arms.<name>`` per row: its owner output held
against the baseline's, ``torch.equal`` in FP32 and BF16). Arms that need real processes
(an arena shared between them) are left to micro and serve-ab."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.runtime import get_profile
from kimi_bench.options import Arm as ArmName
from kimi_bench.pipeline import Arm, OwnerOutput, arms, run_arm


def parity_arms() -> list[Arm]:
    """Every arm of the options that parity can run (in one process) and SGLang's profiles
    have (vllm-0.33's parity is ``parity_vllm``'s)."""
    sglang = get_profile(None).arms
    return [a for a in arms(typing.get_args(ArmName)) if a.in_process and a.name in sglang]


def by_role(role: str) -> Arm:
    return next(a for a in parity_arms() if a.role == role)


def decode_arm() -> Arm | None:
    """The arm whose inputs travel encoded (the ``decode_*`` columns), if any."""
    return next((a for a in parity_arms() if a.encoded_inputs), None)


def other_arms() -> list[Arm]:
    """In-process arms beside the baseline, the change and the encoded-input arm."""
    return [a for a in parity_arms() if a.role is None and not a.encoded_inputs]


def run_other_arms(
    objs: Sequence[Any],
    plans: Sequence[ResizePlan],
    baseline: OwnerOutput,
    cfg: PreprocessConfig,
    ranks: int,
    producer: torch.device,
    rank_dev: torch.device,
    **kw: Any,
) -> list[dict[str, Any]]:
    """Each other arm over a batch: per input ``{"arms": {name: {"bit_exact_fp32": ...,
    "bit_exact_bf16": ..., "deferred": ...}}}`` (empty when there is no other arm)."""
    rows: list[dict[str, Any]] = [{} for _ in objs]
    for arm in other_arms():
        out = run_arm(arm, objs, plans, cfg, ranks, producer, rank_dev, **kw)
        for i, row in enumerate(rows):
            row.setdefault("arms", {})[arm.name] = {
                "deferred": out.decisions[i].defer,
                "bit_exact_fp32": bool(torch.equal(baseline.fp32[i], out.fp32[i])),
                "bit_exact_bf16": bool(torch.equal(baseline.bf16[i], out.bf16[i])),
            }
    return rows


def other_arms_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per other arm: inputs run, all bit-exact, and the inputs that differ."""
    out: dict[str, Any] = {}
    for arm in other_arms():
        ran = [r for r in rows if arm.name in (r.get("arms") or {})]
        res = [r["arms"][arm.name] for r in ran]
        exact = [v["bit_exact_fp32"] and v["bit_exact_bf16"] for v in res]
        out[arm.name] = {
            "label": arm.label,
            "inputs": len(ran),
            "all_bit_exact": bool(ran) and all(exact),
            "differing": [r["name"] for r, ok in zip(ran, exact, strict=True) if not ok],
        }
    return out
