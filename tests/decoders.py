"""A stand-in for a GPU JPEG decoder, behind the decoder interface, for machines without
CUDA: it decodes with PIL and hands the pixels over as a ``DeviceImage`` (a host tensor
stands in for the device memory, as every device copy does without CUDA), so the pipeline
takes the device path (no producer H2D for eager, a D2H of the raw uint8 for deferred, the
owner's own decode for deferred-decode) and the ledger shows it. ``shift`` adds to every
value of progressive JPEGs (clamped), as a GPU decoder's IDCT and upsampling move
pixels; ``refuse`` names inputs it raises on (the runtime then falls back to PIL)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from PIL import Image

from kimi_bench.domain import decoders
from kimi_bench.domain.decoders import DecodeError, Decoder, DeviceImage, is_jpeg


class FakeDeviceDecoder(Decoder):
    on_device = True
    label = "a stand-in GPU decoder (tests)"
    mirrors = "load_image: fake device decode"
    shift = 2
    refuse: tuple[bytes, ...] = ()

    def refuses(self, data: bytes) -> str | None:
        return None if is_jpeg(data) else "not a JPEG (SOI ... EOI)"

    def decode(self, data: bytes, device: torch.device) -> Any:
        if any(marker in data for marker in self.refuse):
            raise DecodeError("the stand-in decoder refuses this file")
        with Image.open(io.BytesIO(data)) as im:
            progressive = bool(im.info.get("progressive") or im.info.get("progression"))
            grey = im.mode == "L"
            arr = np.array(im.convert("L" if grey else "RGB"))
        t = torch.from_numpy(arr[None] if grey else arr).clone()
        t = t if grey else t.permute(2, 0, 1).contiguous()
        if progressive and self.shift:
            t = (t.int() + self.shift).clamp(0, 255).to(torch.uint8)
        return DeviceImage(t, self.name)


@contextmanager
def fake_gpu_decoder(
    name: str = "nvimgcodec", base: type[FakeDeviceDecoder] = FakeDeviceDecoder, **attrs: Any
) -> Iterator[type[Decoder]]:
    """Register the stand-in (``base``, or a subclass of it) under ``name`` for the
    duration (``--decoder name`` then resolves to it on any device)."""
    cls = type("Fake", (base,), dict(attrs))
    saved = decoders.DECODERS.factory(name)
    decoders.register_decoder(name, cls)
    try:
        yield cls
    finally:
        if saved is not None:
            decoders.register_decoder(name, saved)
