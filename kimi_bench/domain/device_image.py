"""A decoded image that lives on the decoding GPU (what a device decoder leaves: see
``kimi_bench.domain.decoders``). The runtime's processor sees a CUDA uint8 CHW tensor; the
policy counts its raw bytes from its shape and the staging keeps it on the device."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DeviceImage:
    """A decoded image on the decoding device: uint8 CHW (1 or 3 channels: a grayscale JPEG
    stays one channel, as torchvision's nvJPEG returns it), and the decoder that made it."""

    tensor: torch.Tensor
    decoder: str

    @property
    def channels(self) -> int:
        return int(self.tensor.shape[0])

    @property
    def width(self) -> int:
        return int(self.tensor.shape[2])

    @property
    def height(self) -> int:
        return int(self.tensor.shape[1])

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height

    @property
    def mode(self) -> str:
        """The PIL mode of the same pixels (what a header check compares with)."""
        return "L" if self.channels == 1 else "RGB"

    @property
    def nbytes(self) -> int:
        return int(self.tensor.numel())
