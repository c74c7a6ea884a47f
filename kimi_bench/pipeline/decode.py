"""Decoding an encoded input inside the pipeline: the one decode an input gets
(``decode_input``, in the ledger), and the stand-in for an image its owner could not
decode (``stand_in``, deferred-decode). Which images travel encoded is the deferred-decode
arm's (``arms.deferred_decode.route``); the owner's decode itself is ``steps.owner_decode``
(it stages the decoded image with ``steps.stage``)."""

from __future__ import annotations

from typing import Any

import torch

from kimi_bench.domain.contract import ENCODED_KEY, MMItem
from kimi_bench.domain.device_image import DeviceImage
from kimi_bench.domain.encoded import decoded_bytes
from kimi_bench.pipeline.step import CPU_STAND_IN, Step


def decode_input(step: Step, data: bytes, fmt: str | None, where: str) -> Any:
    """The one decode of an encoded input, by this process's decoder as the runtime's
    ``load_image`` picks it (``step.decoder``), in the ledger: PIL writes the decoded
    pixels on the host; a device decoder copies the encoded bytes to the GPU and decodes
    there, leaving a ``DeviceImage`` (without CUDA a host copy stands in). Which decoder
    took the input, and why, is appended to ``step.decodes``."""
    done = step.decoder.decode(data, step.device)
    what = f"the encoded {fmt} bytes" if fmt else "the encoded bytes"
    step.decodes.append((done.decoder.name, done.reason))
    if not isinstance(done.image, DeviceImage):
        mirrors = f"{done.decoder.mirrors} of {what}"
        step.ledger.add(where, "decode", "host", "pil", decoded_bytes(done.image), mirrors)
        return done.image
    stand_in = "" if step.on_cuda else CPU_STAND_IN
    step.ledger.add(
        where, "h2d", "host", "device", len(data), f"{done.decoder.mirrors}: {what}" + stand_in
    )
    step.ledger.add(
        where, "decode", "device", "device", done.image.nbytes, done.decoder.mirrors + stand_in
    )
    return done.image


def stand_in(item: MMItem) -> MMItem:
    """A black raw-uint8 image of the size the header planned (its request has failed)."""
    msd = dict(item.model_specific_data)
    header = msd.pop(ENCODED_KEY)
    size = (3, int(header["height"]), int(header["width"]))
    return MMItem(torch.zeros(size, dtype=torch.uint8), msd)
