"""Decoding an encoded input inside the pipeline: the one decode an input gets
(``decode_input``, in the ledger), and the stand-in for an image its owner could not
decode (``stand_in``, deferred-decode). Which images travel encoded is the deferred-decode
arm's (``arms.deferred_decode.route``); the owner's decode itself is ``steps.owner_decode``
(it stages the decoded image with ``steps.stage``)."""

from __future__ import annotations

import torch
from PIL import Image

from kimi_bench.domain.contract import ENCODED_KEY, MMItem
from kimi_bench.domain.encoded import decode_image, decoded_bytes
from kimi_bench.pipeline.step import Step


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
