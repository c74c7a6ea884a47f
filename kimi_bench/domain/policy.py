"""The deferral policy: should an image (or a request's images) stay raw uint8 until the
vision owner is known? Every decision carries its reason and both byte counts
(SPEC section 7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from PIL import Image

from kimi_bench.domain.device_image import DeviceImage
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.pixels import raw_channels

DEFERRING_TRANSPORTS = ("cpu",)
KNOWN_TRANSPORTS = ("cpu", "cuda_ipc", "cuda_vmm")
PolicyMode = Literal["request", "image"]


@dataclass(frozen=True)
class Decision:
    defer: bool
    reason: str
    raw_bytes: int
    processed_bytes: int
    # deferred-decode arm: the image travels as its encoded bytes (False: raw uint8)
    encoded: bool = False


def is_deferrable_input(obj: Any) -> bool:
    """A PIL image, a uint8 tensor, or encoded bytes (decoded into a PIL image)."""
    if isinstance(obj, EncodedImage):
        return obj.header.error is None
    if isinstance(obj, DeviceImage):  # the runtime's check: a uint8 tensor (on the GPU)
        return obj.tensor.dtype == torch.uint8
    return isinstance(obj, Image.Image) or (
        isinstance(obj, torch.Tensor) and obj.dtype == torch.uint8
    )


def raw_bytes(obj: Any, plan: ResizePlan) -> int:
    """C * W * H of the input as the policy counts it (encoded: from its header)."""
    channels = obj.header.channels if isinstance(obj, EncodedImage) else raw_channels(obj)
    return channels * plan.width * plan.height


def processed_bytes(plan: ResizePlan) -> int:
    """FP32 patches: 3 channels * padded_w * padded_h * 4 bytes."""
    return 3 * plan.padded_width * plan.padded_height * 4


def _gate_conditions(
    inputs: Sequence[Any], transport: str, owner_can_materialize: bool
) -> str | None:
    if not inputs:
        return "no images in the request"
    if transport not in KNOWN_TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; expected one of {KNOWN_TRANSPORTS}")
    if transport not in DEFERRING_TRANSPORTS:
        return f"transport {transport} keeps features on the GPU (eager)"
    if not owner_can_materialize:
        return "the owner cannot materialize on CUDA"
    for i, obj in enumerate(inputs):
        if not is_deferrable_input(obj):
            kind = obj.dtype if isinstance(obj, torch.Tensor) else type(obj).__name__
            return f"image {i} is {kind}, not a PIL image or a uint8 tensor"
    return None


def _byte_verdict(raw: int, processed: int) -> tuple[bool, str]:
    if raw <= processed:
        return True, f"raw {raw:,} B <= processed {processed:,} B"
    return False, f"raw {raw:,} B > processed {processed:,} B (FP32 is smaller)"


def decide_request(
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    transport: str = "cpu",
    owner_can_materialize: bool = True,
) -> Decision:
    """Per-request mode (the PR): all of a request's images are deferred or none is."""
    raw = sum(raw_bytes(o, p) for o, p in zip(inputs, plans, strict=True))
    proc = sum(processed_bytes(p) for p in plans)
    blocked = _gate_conditions(inputs, transport, owner_can_materialize)
    if blocked is not None:
        return Decision(False, blocked, raw, proc)
    defer, why = _byte_verdict(raw, proc)
    return Decision(defer, why, raw, proc)


def decide_images(
    inputs: Sequence[Any],
    plans: Sequence[ResizePlan],
    mode: PolicyMode = "request",
    transport: str = "cpu",
    owner_can_materialize: bool = True,
) -> list[Decision]:
    """One decision per image. In ``request`` mode every image shares the request's
    verdict (its reason names the request totals); in ``image`` mode (later runtimes'
    cache path) each image is judged on its own bytes."""
    if mode == "request":
        req = decide_request(inputs, plans, transport, owner_can_materialize)
        out = []
        for o, p in zip(inputs, plans, strict=True):
            why = req.reason if len(inputs) == 1 else f"request: {req.reason}"
            out.append(Decision(req.defer, why, raw_bytes(o, p), processed_bytes(p)))
        return out
    if mode != "image":
        raise ValueError(f"unknown policy mode {mode!r}; expected 'request' or 'image'")
    return [
        decide_request([o], [p], transport, owner_can_materialize)
        for o, p in zip(inputs, plans, strict=True)
    ]
