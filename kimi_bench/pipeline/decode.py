"""The deferred-decode arm's own steps (PROPOSED, not in the runtime): which deferred
images travel encoded (``route``), the one decode an input gets (``decode_input``), and
the stand-in for an image its owner could not decode (``stand_in``). The owner's decode
itself is ``steps.owner_decode`` (it stages the decoded image with ``steps.stage``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from kimi_bench.domain.contract import ENCODED_KEY, MMItem
from kimi_bench.domain.encoded import decode_image, decoded_bytes, route_reason
from kimi_bench.domain.policy import Decision
from kimi_bench.pipeline.step import Step


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


def decode_input(step: Step, data: bytes, fmt: str | None, where: str) -> Image.Image:
    """The one decode of an encoded input (``encoded.decode_image``), in the ledger."""
    im = decode_image(data)
    mirrors = f"load_image: Image.open + load of the encoded {fmt} bytes"
    step.ledger.add(where, "decode", "host", "pil", decoded_bytes(im), mirrors)
    return im


def stand_in(item: MMItem) -> MMItem:
    """A black raw-uint8 image of the size the header planned (its request has failed)."""
    msd = dict(item.model_specific_data)
    header = msd.pop(ENCODED_KEY)
    size = (3, int(header["height"]), int(header["width"]))
    return MMItem(torch.zeros(size, dtype=torch.uint8), msd)
