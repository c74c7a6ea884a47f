"""``zero-copy``: **proposed, not in the runtime**. The producer writes each deferred
image's decoded pixels once, straight into a slot of a shared-memory arena
(``pipeline.arena``); only slot metadata (an ``ArenaRef``: slot, generation, offset, shape)
is pickled and broadcast; each owner copies its images to its device straight from the
(page-locked) arena (``steps.rank_step``); every rank releases the slots of a step once
its own copies completed (``release_slots``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from kimi_bench.domain.contract import (
    DEFERRED_KEY,
    GRID_KEY,
    MMItem,
    grid_tensor,
    make_deferred_record,
)
from kimi_bench.domain.device_image import DeviceImage
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.pixels import (
    StagingError,
    pil_target_mode,
    tensor_to_chw,
)
from kimi_bench.domain.policy import Decision
from kimi_bench.pipeline.arena import Arena
from kimi_bench.pipeline.arena_layout import ALIGN, ArenaRef
from kimi_bench.pipeline.arms.base import PROPOSED, Arm
from kimi_bench.pipeline.decode import decode_input
from kimi_bench.pipeline.step import CPU_STAND_IN, Step
from kimi_bench.pipeline.steps import need_arena, produce, stage_on_device


class ZeroCopy(Arm):
    label = PROPOSED
    needs_arena = True
    in_process = False  # the arena is shared between real processes
    ledger_ops = ("arena_copy_in",)

    def produce(
        self,
        step: Step,
        images: Sequence[Any],
        plans: Sequence[ResizePlan],
        decisions: Sequence[Decision],
    ) -> list[MMItem]:
        return produce_zero_copy(step, images, plans, decisions)


# PIL modes whose in-memory pixels (4 bytes each) already hold the target channels in
# order: pasted as they are, the owner keeps the first 3 (RGB) or all 4 (RGBA) channels.
_DIRECT_MODES = {"RGB": ("RGB", "RGBA", "RGBX"), "RGBA": ("RGBA",)}


def _arena_job(step: Step, arena: Arena, slot: int, offset: int, obj: Any) -> tuple[ArenaRef, Any]:
    """Where one input goes in the slot and the callable that copies it there (once);
    the ledger gets the copies the callable will make."""
    gen = arena.generation(slot)
    if isinstance(obj, EncodedImage):  # decoded at the producer, as every arm but one
        obj = decode_input(step, obj.data, obj.header.format, "producer")
    if isinstance(obj, DeviceImage):  # decoded on the GPU: one D2H straight into the slot
        t = stage_on_device(step, obj, "producer")
        ref = ArenaRef(slot, gen, offset, (3, obj.height, obj.width), "chw", 3)
        mirrors = "zero-copy: D2H into the slot" + ("" if step.on_cuda else CPU_STAND_IN)
        step.ledger.add("producer", "d2h", "device", "shm", ref.nbytes, mirrors)
        return ref, lambda: arena.view(ref).copy_(t)
    if isinstance(obj, Image.Image):
        target = pil_target_mode(obj, step.cfg)
        w, h = obj.size
        ref = ArenaRef(slot, gen, offset, (h, w, 4), "hwc", len(target))
        direct = obj.mode in _DIRECT_MODES[target]
        if not direct:  # e.g. L, P, LA: the same conversion as the runtime's, then the copy
            nbytes = len(target) * w * h
            step.ledger.add("producer", "convert", "pil", "pil", nbytes, "Image.convert")
        step.ledger.add(
            "producer", "arena_copy_in", "pil", "shm", ref.nbytes, "zero-copy: paste into slot"
        )
        return ref, lambda: arena.paste(slot, offset, obj if direct else obj.convert(target))
    if isinstance(obj, torch.Tensor):
        t = tensor_to_chw(obj.detach().cpu(), require_uint8=True, contiguous=False)
        if obj.dim() == 2 or (obj.dim() == 3 and obj.shape[0] == 1):
            step.ledger.add("producer", "channel_repeat", "host", "host", tensor_bytes(t), "")
        if t.shape[0] == 4 and step.cfg.transparent_bg is None:
            t = t[:3]
        c, h, w = (int(v) for v in t.shape)
        ref = ArenaRef(slot, gen, offset, (c, h, w), "chw", c)
        step.ledger.add(
            "producer", "arena_copy_in", "host", "shm", ref.nbytes, "zero-copy: copy_ into slot"
        )
        return ref, lambda: arena.view(ref).copy_(t)
    raise StagingError(
        f"unsupported input type {type(obj).__name__}; expected a PIL image or a tensor"
    )


def stage_into_arena(step: Step, images: Sequence[Any]) -> list[ArenaRef]:
    """Take a slot for the request and copy every image into it once (in parallel
    threads); the slot goes back if anything fails before the metadata leaves."""
    arena = need_arena(step)
    slot = arena.acquire()
    try:
        refs, jobs, offset = [], [], 0
        for obj in images:
            ref, job = _arena_job(step, arena, slot, offset, obj)
            arena.region(slot, offset, ref.nbytes)  # raises if the request outgrows the slot
            offset += -(-ref.nbytes // ALIGN) * ALIGN
            refs.append(ref)
            jobs.append(job)
        arena.run_parallel(jobs)
    except BaseException:
        arena.abandon(slot)
        raise
    return refs


def produce_zero_copy(
    step: Step,
    images: Sequence[Any],
    plans: Sequence[ResizePlan],
    decisions: Sequence[Decision],
) -> list[MMItem]:
    """The producer step of the zero-copy arm: deferred images into the arena (their
    feature is an ``ArenaRef``), images the policy keeps eager as in ``produce``. Marks
    ``producer`` and ``d2h``."""
    deferred = [i for i, d in enumerate(decisions) if d.defer]
    eager = [i for i, d in enumerate(decisions) if not d.defer]
    items: dict[int, MMItem] = {}
    if deferred:
        refs = stage_into_arena(step, [images[i] for i in deferred])
        for i, ref in zip(deferred, refs, strict=True):
            msd = {
                GRID_KEY: grid_tensor(plans[i]),
                DEFERRED_KEY: make_deferred_record(plans[i], step.cfg),
            }
            items[i] = MMItem(ref, msd)  # type: ignore[arg-type]
    if eager:
        pick = lambda seq: [seq[i] for i in eager]  # noqa: E731
        items |= dict(
            zip(eager, produce(step, pick(images), pick(plans), pick(decisions)), strict=True)
        )
    else:
        step.hook.mark("producer")
        step.hook.mark("hash")  # a proposed arm: no runtime feature hash is emulated
        step.hook.mark("d2h")
    return [items[i] for i in range(len(images))]


def held_slots(items: Sequence[MMItem]) -> list[tuple[int, int]]:
    """(slot, generation) of every arena item of a step (take it before ``rank_step``)."""
    refs: list[Any] = [it.feature for it in items]
    return sorted({(f.slot, f.gen) for f in refs if isinstance(f, ArenaRef)})


def release_slots(step: Step, held: Sequence[tuple[int, int]]) -> None:
    """After the rank step: wait for this rank's copies out of the arena, then mark the
    slots done for this rank (a non-owner never touched them and releases at once)."""
    if not held:
        return
    arena = need_arena(step)
    arena.wait_copies()
    for slot, gen in held:
        arena.release(slot, gen)
