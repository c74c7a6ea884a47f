"""``nvjpeg``: the PR-era JPEG decode (SGLang PR #33921; ``KimiK3ImageProcessor``'s
``gpu_image_decode = True``, ``sglang/srt/utils/common.py`` ``_load_image``):
``torchvision.io.decode_jpeg(torch.frombuffer(data), device="cuda")``, nvJPEG with its
default flags (nearest-neighbour chroma upsampling), mode UNCHANGED (a grayscale JPEG
stays one channel), EXIF orientation not applied; a CUDA uint8 CHW tensor on the current
GPU. torchvision keeps one decoder per process behind a lock. Bytes not framed as a JPEG,
a machine without CUDA and a failed decode go to PIL, with a warning."""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import Any

import torch

from kimi_bench.domain.decoders.base import Decoder, DeviceImage, is_jpeg


class TorchvisionNvJpegDecoder(Decoder):
    on_device = True
    label = "torchvision nvJPEG (decode_jpeg, default flags)"
    distributions = ("torchvision",)
    mirrors = "load_image: torchvision.io.decode_jpeg(device='cuda')"

    def unavailable(self, device: torch.device) -> str | None:
        if device.type != "cuda":
            return "no CUDA device"
        try:
            found = importlib.util.find_spec("torchvision") is not None
        except (ImportError, ValueError):
            found = False
        return None if found else "torchvision not importable"

    def refuses(self, data: bytes) -> str | None:
        return None if is_jpeg(data) else "not a JPEG (SOI ... EOI)"

    def decode(self, data: bytes, device: torch.device) -> Any:
        io: Any = importlib.import_module("torchvision.io")
        with warnings.catch_warnings():  # bytes are read-only; torchvision only reads them
            warnings.simplefilter("ignore", UserWarning)
            encoded = torch.frombuffer(data, dtype=torch.uint8)
        target = device if device.index is not None else torch.device("cuda")
        return DeviceImage(io.decode_jpeg(encoded, device=target), self.name)
