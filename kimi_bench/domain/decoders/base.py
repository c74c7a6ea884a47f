"""What a decoder is: how the runtime turns a request's encoded image into the image its
processor sees, and what it declares about itself (where it decodes, which library, which
inputs it takes), so that nothing outside its module asks for its name.

A host decoder (PIL) leaves a PIL image. A device decoder (nvImageCodec, torchvision's
nvJPEG) leaves a ``DeviceImage``: uint8 CHW on the decoding GPU, as the runtime's
``load_image`` returns a CUDA tensor; without CUDA a host tensor stands in for the device
memory (and the copy ledger says so)."""

from __future__ import annotations

import importlib.metadata
from typing import Any, ClassVar

import torch

from kimi_bench.domain.device_image import DeviceImage

__all__ = ["DecodeError", "Decoder", "DeviceImage", "is_jpeg"]


class DecodeError(RuntimeError):
    """A decoder could not decode an input (the runtime then falls back to PIL)."""


def is_jpeg(data: bytes | memoryview) -> bool:
    """The runtime's test (``is_jpeg_with_cuda``): starts with SOI ``FF D8`` and ends with
    EOI ``FF D9`` (a JPEG with bytes after its EOI goes to PIL)."""
    head, tail = bytes(data[:2]), bytes(data[-2:])
    return len(data) >= 4 and head == b"\xff\xd8" and tail == b"\xff\xd9"


class Decoder:
    """One way to decode. Declared: ``on_device`` (decodes on the GPU and leaves a
    ``DeviceImage``), ``label`` (what the report calls it), ``distributions`` (the packages
    whose installed version the report records), ``mirrors`` (the runtime function it
    follows)."""

    on_device: ClassVar[bool] = False
    label: ClassVar[str] = ""
    distributions: ClassVar[tuple[str, ...]] = ()
    mirrors: ClassVar[str] = ""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def unavailable(self, device: torch.device) -> str | None:
        """Why this decoder cannot run on ``device`` here (None: it can)."""
        return None

    def refuses(self, data: bytes) -> str | None:
        """Why the runtime would not give these bytes to this decoder (None: it would)."""
        return None

    def decode(self, data: bytes, device: torch.device) -> Any:
        """The decoded image (PIL image, or a ``DeviceImage`` on ``device``); raises
        ``DecodeError`` (or the library's error) when the bytes do not decode."""
        raise NotImplementedError

    def version(self) -> str | None:
        """The installed version of the library (None: not installed or not known)."""
        for name in self.distributions:
            try:
                return importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None
