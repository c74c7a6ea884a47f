"""``vllm-uint8``: vLLM 0.33's K3 image path (runtime profile ``vllm-0.33``; SPEC section
13). The API server preprocesses every image to uint8 patches (no deferral: every
decision is "not deferred", with the reason); every worker stages every item into pinned
memory, copies it to its GPU and normalises it there (``pipeline.vllm_steps``). It gets
its inputs encoded, as the API server does: the decode, the EXIF orientation and the
white background are vLLM's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.policy import Decision, PolicyMode, processed_bytes
from kimi_bench.pipeline.arms.base import Arm
from kimi_bench.pipeline.step import RankOutput, Step
from kimi_bench.pipeline.vllm_steps import produce, rank_step

NO_DEFERRAL = "vLLM 0.33 has no deferral: the API server makes uint8 patches of every image"


class Vllm(Arm):
    role = "baseline"
    encoded_inputs = True
    ledger_ops = (
        "exif_transpose", "composite", "pil_resize", "patchify", "blake3", "msgpack",
        "oob_frame", "unmsgpack", "frombuffer", "ring_copy_in", "ring_copy_out",
        "zmq_delivery", "mq_arena_copy_in", "pinned_staging",
    )  # fmt: skip

    def load(self, step: Step, data: bytes) -> Any:
        """The API server keeps the request's encoded bytes; it decodes in its step."""
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
        """Never deferred; the bytes that travel are the uint8 patches (FP32 for the
        policy's count: the processed side)."""
        return [Decision(False, NO_DEFERRAL, 0, processed_bytes(p)) for p in plans]

    def produce(
        self,
        step: Step,
        images: Sequence[Any],
        plans: Sequence[ResizePlan],
        decisions: Sequence[Decision],
    ) -> list[MMItem]:
        return produce(step, images, plans, decisions)

    def rank_step(
        self,
        step: Step,
        items: list[MMItem],
        rank: int,
        world: int,
        decode_errors: list[tuple[int, str]] | None = None,
    ) -> RankOutput:
        return rank_step(step, items, rank, world, decode_errors)
