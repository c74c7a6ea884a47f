"""``eager``: the runtime *before* the change. The producer stages every image,
preprocesses it on its device and copies the FP32 patches to the host; the scheduler's
model class is not whitelisted, so every rank moves every item to its device (the
pre-embed move)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.pixels import StagingError
from kimi_bench.domain.policy import Decision, PolicyMode, processed_bytes, raw_bytes
from kimi_bench.pipeline.arms.base import Arm
from kimi_bench.pipeline.step import Step


class Eager(Arm):
    role = "baseline"
    whitelisted = False

    def decide(
        self,
        step: Step,
        images: Sequence[Any],
        plans: Sequence[ResizePlan],
        *,
        scope: PolicyMode | None = None,
        owner_can_materialize: bool = True,
    ) -> list[Decision]:
        """The baseline never defers."""
        return [
            Decision(False, "eager arm: the baseline preprocesses at the producer", r, p)
            for r, p in (
                (_raw_or_zero(o, pl), processed_bytes(pl))
                for o, pl in zip(images, plans, strict=True)
            )
        ]


def _raw_or_zero(obj: Any, plan: ResizePlan) -> int:
    try:
        return raw_bytes(obj, plan)
    except StagingError:
        return 0
