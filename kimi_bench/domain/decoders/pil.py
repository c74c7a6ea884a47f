"""``pil``: the runtime's CPU decode (``sglang.srt.utils.common._load_image``:
``Image.open(BytesIO(data))`` then the pixels loaded; no EXIF transpose). Every input that
is not a JPEG, every input on a machine without CUDA, and every input a GPU decoder gives
up on decodes here."""

from __future__ import annotations

from typing import Any

import torch

from kimi_bench.domain.decoders.base import Decoder
from kimi_bench.domain.encoded import decode_image


class PilDecoder(Decoder):
    label = "PIL (Image.open + load)"
    distributions = ("pillow",)
    mirrors = "load_image: Image.open + load"

    def decode(self, data: bytes, device: torch.device) -> Any:
        return decode_image(data)
