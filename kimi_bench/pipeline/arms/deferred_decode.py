"""``deferred-decode``: **proposed, not in the runtime** (``kimi_bench.domain.encoded``).
Inputs that arrive encoded (JPEG/PNG/WebP bytes) are planned from their header alone and
travel as their encoded bytes (a 1-D uint8 feature, any carrier); only the owner decodes
them, with the producer's decode path, and stages and materializes as in ``deferred``
(``steps.rank_step`` sees an encoded item). An input the header cannot vouch for
(``encoded.route_reason``) is routed to the raw-uint8 deferred path; its decision's reason
says why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kimi_bench.domain.encoded import EncodedImage, route_reason
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.policy import Decision, PolicyMode
from kimi_bench.pipeline.arms.base import PROPOSED, Arm
from kimi_bench.pipeline.step import Step


class DeferredDecode(Arm):
    label = PROPOSED
    encoded_inputs = True
    ledger_ops = ("decode",)  # on the owner, inside owner_h2d

    def load(self, step: Step, data: bytes) -> Any:
        """The header only: the owner decodes."""
        return EncodedImage(data)

    def decide(
        self,
        step: Step,
        images: Sequence[Any],
        plans: Sequence[ResizePlan],
        *,
        scope: PolicyMode | None = None,
        owner_can_materialize: bool = True,
    ) -> list[Decision]:
        """The policy's decision, then per deferred image: encoded or routed (why)."""
        out = super().decide(
            step, images, plans, scope=scope, owner_can_materialize=owner_can_materialize
        )
        return route(images, out)


def route(images: Sequence[Any], decisions: Sequence[Decision]) -> list[Decision]:
    """Per deferred image: encoded (header vouches, and the bytes are fewer than raw) or
    routed to raw uint8 with the reason. Images the policy keeps eager stay eager."""
    out = []
    for obj, d in zip(images, decisions, strict=True):
        if not d.defer:
            out.append(d)
            continue
        why = route_reason(obj)
        if why is None and obj.nbytes >= d.raw_bytes:
            why = f"encoded {obj.nbytes:,} B >= raw {d.raw_bytes:,} B: nothing saved, raw uint8"
        if why is None:
            note = f"; travels encoded ({obj.header.format}, {obj.nbytes:,} B), the owner decodes"
            out.append(Decision(True, d.reason + note, d.raw_bytes, d.processed_bytes, True))
        else:
            out.append(Decision(True, f"{d.reason}; routed: {why}", d.raw_bytes, d.processed_bytes))
    return out
