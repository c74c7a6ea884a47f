"""Encoded images (JPEG/PNG/WebP bytes, as a chat request's data URL carries them) for the
``deferred-decode`` arm (proposed, not in the runtime): what the producer may learn from
the header alone, when it must not ship the encoded bytes, and the one decode path.

The decode path is the runtime's CPU one (``sglang.srt.utils.common._load_image``:
``Image.open(BytesIO(data))`` then ``image.load()``; no EXIF transpose). Every arm uses
:func:`decode_image`: the producer of eager/deferred/zero-copy and the owner of
deferred-decode run the same code, so the owner's pixels are the producer's pixels.

Header-only planning needs the size (NaViT plan, grid, token count) and, for the
deferral policy, whether the image has alpha (4 raw channels instead of 3). An input is
shipped encoded only when the header is known to tell both truthfully; otherwise it is
*routed* to the raw-uint8 deferred path (decoded at the producer) with the reason.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from kimi_bench.domain.device_image import DeviceImage
from kimi_bench.domain.pixels import StagingError, pil_has_alpha

# Formats whose header (read by Image.open before any pixel) gives the size, the mode and
# the transparency the decoded image will have: JPEG (SOF before scan data), PNG (IHDR,
# PLTE and tRNS must precede IDAT), WebP (VP8/VP8L/VP8X header).
HEADER_FORMATS = ("JPEG", "PNG", "WEBP")
# Modes the built-in corpus proves the staging conversion (convert to RGB/RGBA) for.
HEADER_MODES = ("1", "L", "LA", "P", "RGB", "RGBA", "CMYK", "I;16", "I;16B", "I")
_PIXEL_BYTES = {"I;16": 2, "I;16B": 2, "I;16L": 2, "I": 4, "F": 4}


@dataclass(frozen=True)
class ImageHeader:
    """What ``Image.open`` read before any pixel was decoded (``error``: it could not)."""

    format: str | None
    mode: str
    width: int
    height: int
    has_alpha: bool
    frames: int = 1
    orientation: int | None = None  # EXIF 0x0112, recorded; the decode path ignores it
    error: str | None = None

    @property
    def channels(self) -> int:
        """Channels the deferral policy counts (SPEC section 7: 4 with alpha, else 3)."""
        return 4 if self.has_alpha else 3


def read_header(data: bytes) -> ImageHeader:
    """The header of an encoded image; nothing is decoded (``Image.open`` is lazy)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            orientation = None
            if im.format == "JPEG":
                orientation = im.getexif().get(0x0112)
            return ImageHeader(
                format=im.format,
                mode=im.mode,
                width=int(im.size[0]),
                height=int(im.size[1]),
                has_alpha=pil_has_alpha(im),
                frames=int(getattr(im, "n_frames", 1) or 1),
                orientation=int(orientation) if orientation is not None else None,
            )
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        return ImageHeader(None, "", 0, 0, False, error=f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class EncodedImage:
    """An input as it arrives: its encoded bytes and their header (read once)."""

    data: bytes
    name: str = ""
    header: ImageHeader = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "header", read_header(self.data))

    @property
    def size(self) -> tuple[int, int]:
        if self.header.error is not None:
            raise StagingError(f"encoded image {self.name!r}: {self.header.error}")
        return self.header.width, self.header.height

    @property
    def width(self) -> int:
        return self.size[0]

    @property
    def height(self) -> int:
        return self.size[1]

    @property
    def nbytes(self) -> int:
        return len(self.data)


def decode_image(data: bytes | memoryview) -> Image.Image:
    """THE decode path (the runtime's CPU ``_load_image``): open, then load the pixels
    while a malformed input still fails where it was opened. PIL's own exceptions
    (``OSError``, ``SyntaxError``) propagate unchanged, as serve's producers report them."""
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def decoded_bytes(im: Image.Image) -> int:
    """Bytes of a decoded image's pixel buffer (what the decode writes)."""
    per_band = _PIXEL_BYTES.get(im.mode, 1)
    return im.width * im.height * len(im.getbands()) * per_band


def _stream_complete(fmt: str, data: bytes) -> bool:
    """The stream ends where its format says it ends (a cheap check, nothing decoded):
    JPEG's EOI marker near the end, PNG's IEND chunk last, WebP's RIFF length."""
    if fmt == "JPEG":
        return b"\xff\xd9" in data[-64:]
    if fmt == "PNG":
        return data[-8:-4] == b"IEND"
    if fmt == "WEBP":
        return len(data) >= 12 and int.from_bytes(data[4:8], "little") + 8 <= len(data)
    return False


def route_reason(obj: Any) -> str | None:
    """Why this input cannot travel encoded (None: it can). Read from the header only."""
    if not isinstance(obj, EncodedImage):
        kind = "a tensor" if isinstance(obj, torch.Tensor) else "a decoded image"
        return f"no encoded form ({kind}): raw uint8"
    h = obj.header
    if h.error is not None:
        return f"header does not open ({h.error}): decoded at the producer"
    if h.format not in HEADER_FORMATS:
        return f"format {h.format}: header-only planning is trusted for JPEG, PNG, WebP only"
    if h.frames > 1:
        return f"{h.frames} frames: the frame and mode a decode yields are known only then"
    if h.mode not in HEADER_MODES:
        return f"mode {h.mode}: its conversion to RGB is proven only after decoding"
    if not _stream_complete(h.format, obj.data):
        return (
            f"{h.format} stream has no end marker (truncated?): decoded at the producer, "
            "where a decode error stays with its request"
        )
    return None


# modes PNG stores losslessly (as PIL writes them); anything else is sent as JPEG
_PNG_MODES = ("1", "L", "LA", "P", "RGB", "RGBA", "I;16", "I")


def encode_for_request(im: Image.Image) -> bytes:
    """An image as a client would send it: PNG (lossless) where PNG holds its mode, else
    JPEG quality 95 (e.g. CMYK). Palette transparency is kept."""
    buf = io.BytesIO()
    if im.mode in _PNG_MODES:
        kw: dict[str, Any] = {"compress_level": 1}
        if "transparency" in im.info:
            kw["transparency"] = im.info["transparency"]
        im.save(buf, "PNG", **kw)
    else:
        im.save(buf, "JPEG", quality=95)
    return buf.getvalue()


def encode_jpeg(im: Image.Image, quality: int = 85) -> bytes:
    """A generated image as serve-ab's requests carry it (JPEG, quality 85)."""
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def encoded_feature(enc: EncodedImage) -> torch.Tensor:
    """The encoded bytes as a 1-D uint8 tensor (a view of ``enc.data``: no copy), so that
    every carrier moves them as it moves any feature."""
    with warnings.catch_warnings():  # bytes are read-only; the tensor is never written
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(enc.data, dtype=torch.uint8)


def encoded_record(enc: EncodedImage) -> Mapping[str, Any]:
    """What the owner checks its decode against (the header the producer planned from)."""
    h = enc.header
    return {
        "format": h.format,
        "mode": h.mode,
        "width": h.width,
        "height": h.height,
        "nbytes": enc.nbytes,
    }


def check_decoded(im: Any, record: Mapping[str, Any]) -> None:
    """The owner's decode must be the image the producer planned: same size and mode (a
    GPU decode is RGB or one channel whatever the JPEG's mode: its size, since a JPEG has
    no alpha and the plan counted three channels)."""
    want = (int(record["width"]), int(record["height"]), str(record["mode"]))
    got = (im.width, im.height, want[2] if isinstance(im, DeviceImage) else im.mode)
    if got != want:
        raise StagingError(
            f"decoded {got[0]}x{got[1]} {got[2]} but the header planned "
            f"{want[0]}x{want[1]} {want[2]}: the plan would be wrong"
        )
