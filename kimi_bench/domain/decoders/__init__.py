"""The decoder registry and the runtime's choice of decoder (SPEC section 11).

A decoder is an object (:class:`Decoder`) chosen once per process by ``choose``: the one
asked for (``--decoder``), or with ``auto`` the one the runtime profile uses on this
device (``sglang-0.5.23``: nvImageCodec; ``pr-33921``: torchvision's nvJPEG; without CUDA:
PIL). Per input, ``DecoderChoice.decode`` does what the runtime's ``load_image`` does: a
device decoder takes only bytes framed as a JPEG, and anything it cannot take or fails on
goes to PIL, with the reason kept. Built in: ``pil``, ``nvimgcodec``, ``nvjpeg``; another
module registers its own with ``register_decoder``."""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypedDict

import torch
from PIL import Image

from kimi_bench.domain.decoders.base import DecodeError, Decoder, DeviceImage, is_jpeg
from kimi_bench.domain.decoders.nvimgcodec import NvImageCodecDecoder
from kimi_bench.domain.decoders.nvjpeg import TorchvisionNvJpegDecoder
from kimi_bench.domain.decoders.pil import PilDecoder
from kimi_bench.domain.runtime import RuntimeProfile
from kimi_bench.infra.registry import Registry

__all__ = [
    "AUTO",
    "DecodeError",
    "Decoded",
    "Decoder",
    "DecoderChoice",
    "DeviceImage",
    "Replayed",
    "choose",
    "decoder",
    "is_jpeg",
    "register_decoder",
    "replayed",
]  # fmt: skip

AUTO = "auto"


class UnknownDecoder(ValueError):
    pass


DECODERS: Registry[Decoder] = Registry(
    lambda name, known: UnknownDecoder(f"unknown decoder {name!r}; known: {known}")
)


def register_decoder(name: str, factory: Callable[[str], Decoder]) -> None:
    DECODERS.register(name, factory)


register_decoder("pil", PilDecoder)
register_decoder("nvimgcodec", NvImageCodecDecoder)
register_decoder("nvjpeg", TorchvisionNvJpegDecoder)


def decoder(name: str) -> Decoder:
    return DECODERS.get(name)


@dataclass(frozen=True)
class Decoded:
    """One input's decode: the image, the decoder that made it and why that one."""

    image: Any
    decoder: Decoder
    reason: str


class DecoderSummary(TypedDict):
    """``DecoderChoice.summary``: the decoder chosen, why, its library's version and the
    fallback."""

    decoder: str
    label: str
    reason: str
    version: str | None
    fallback: str


@dataclass(frozen=True)
class DecoderChoice:
    """The decoder of a process (``chosen``, and why), with the runtime's fallback."""

    chosen: Decoder
    reason: str
    fallback: Decoder
    requested: str = AUTO  # what was asked for (another device chooses again from it)

    def decode(self, data: bytes, device: torch.device) -> Decoded:
        """The runtime's ``load_image`` for one input: the chosen decoder when it takes
        the bytes, else (or when it fails) PIL with the reason."""
        if self.chosen is self.fallback:
            return Decoded(self.fallback.decode(data, device), self.fallback, self.reason)
        why = self.chosen.refuses(data)
        if why is None:
            try:
                return Decoded(self.chosen.decode(data, device), self.chosen, self.reason)
            except Exception as exc:  # the runtime catches every decode failure here
                why = f"{self.chosen.name} failed ({type(exc).__name__}: {exc})"
        return Decoded(self.fallback.decode(data, device), self.fallback, f"{why}: PIL")

    def warm(self, device: torch.device) -> float:
        """One decode of a small JPEG by the chosen device decoder, before any traffic (its
        library loaded, its handles made: seconds on a first call), as a server's warm-up
        request does; the seconds it took. PIL needs none (0.0). A failure here is left to
        the real decodes, which fall back as the runtime does."""
        if not self.chosen.on_device:
            return 0.0
        t0 = time.perf_counter()
        try:
            self.chosen.decode(_warm_jpeg(), device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception:  # the inputs' own decodes report it
            pass
        return time.perf_counter() - t0

    def summary(self) -> DecoderSummary:
        """What a report's environment says about the decoder and its library."""
        return {
            "decoder": self.chosen.name,
            "label": self.chosen.label,
            "reason": self.reason,
            "version": self.chosen.version(),
            "fallback": self.fallback.name,
        }


@dataclass(frozen=True)
class Replayed(DecoderChoice):
    """A choice that decodes each distinct input once and hands every later request for
    the same bytes that one decode (``DecoderChoice.replayed``): the runtime decodes a
    request's image once, before the deferral decision, so every arm fed from one
    request sees the same pixels. ``again`` decodes afresh (the nondeterminism check)."""

    done: dict[bytes, Decoded] = field(default_factory=dict, compare=False, repr=False)

    def decode(self, data: bytes, device: torch.device) -> Decoded:
        key = hashlib.sha256(data).digest()
        if key not in self.done:
            self.done[key] = super().decode(data, device)
        return self.done[key]

    def again(self, data: bytes, device: torch.device) -> Decoded:
        return super().decode(data, device)


def replayed(choice: DecoderChoice) -> Replayed:
    """``choice`` decoding each distinct input once (``Replayed``)."""
    if isinstance(choice, Replayed):
        return choice
    return Replayed(choice.chosen, choice.reason, choice.fallback, choice.requested)


@cache
def _warm_jpeg() -> bytes:
    buf = io.BytesIO()
    Image.linear_gradient("L").convert("RGB").resize((64, 64)).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def choose(requested: str, profile: RuntimeProfile, device: torch.device) -> DecoderChoice:
    """The decoder for ``requested`` (a name, or ``auto``: the profile's on CUDA, PIL
    without) on ``device``; a device decoder that cannot run here falls back to PIL, as
    the runtime does when nvImageCodec is not importable, and the reason says so."""
    pil = decoder("pil")
    if requested == AUTO:
        if device.type != "cuda":
            return DecoderChoice(pil, "no CUDA: PIL, as the runtime decodes without CUDA", pil)
        name, why = profile.decoder, f"{profile.name} on CUDA"
    else:
        name, why = requested, "--decoder"
    want = decoder(name)
    missing = want.unavailable(device)
    if missing is not None:
        reason = f"{why}: {name}, but {missing}: PIL, as the runtime falls back"
        return DecoderChoice(pil, reason, pil, requested)
    return DecoderChoice(want, f"{why}: {want.label}", pil, requested)
