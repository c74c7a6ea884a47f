"""Reading one file a user hands in as a parity or micro input, within bounds: images
with PIL (frame 0 of a multi-frame file), ``.npy`` and ``.pt``/``.pth`` tensors.

Sizes are checked before anything large is allocated: images against the pixel limit
from their header, ``.npy`` tensors from their header, ``.pt`` tensors memory-mapped (their
data is not read until the shape passed). Every failure is an ``InputError`` naming why,
which the run records against that one input and goes on.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageFile

from kimi_bench.infra.limits import LimitError, open_regular

TENSOR_SUFFIXES = (".pt", ".pth", ".npy")


class InputError(ValueError):
    """One input that cannot be used; the run records it and goes on."""


def _open_fd(path: Path, what: str) -> int:
    """A descriptor of a non-empty regular file; InputError naming what it is otherwise."""
    try:
        fd = open_regular(path, what)
    except LimitError as exc:
        raise InputError(str(exc)) from None
    if os.fstat(fd).st_size == 0:
        os.close(fd)
        raise InputError("zero-byte file")
    return fd


def read_image_bytes(path: Path) -> bytes:
    """An image file's encoded bytes, under ``open_image``'s file checks (the deferred-decode
    arm ships them as they are)."""
    with os.fdopen(_open_fd(path, "image"), "rb") as f:
        return f.read()


def open_header(fp: Any, max_pixels: int, hint: str = "") -> ImageFile.ImageFile:
    """The image of file object or path ``fp`` with only its header read; InputError when
    PIL cannot open it or it has more than ``max_pixels`` (``hint`` ends that message)."""
    try:
        im = Image.open(fp)
    except Image.DecompressionBombError as exc:
        raise InputError(f"decompression bomb refused by PIL: {exc}") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"not an image PIL can open: {exc}") from None
    w, h = im.size
    if w * h > max_pixels:
        im.close()
        raise InputError(
            f"decompression bomb guard: {w}x{h} = {w * h:,} pixels > limit {max_pixels:,}{hint}"
        )
    return im


def open_image(path: Path, max_pixels: int) -> tuple[Image.Image, str | None]:
    """Frame 0 of an image file, refused before decoding when over ``max_pixels``, and
    what a reader of its row must know (a multi-frame file: which frame was used)."""
    with os.fdopen(_open_fd(path, "image"), "rb") as f:
        im = open_header(f, max_pixels, " (raise it with --max-pixels)")
        frames = int(getattr(im, "n_frames", 1) or 1)
        try:
            im.load()
            # frame 0 alone, detached from the file
            out: Image.Image = im.copy() if frames > 1 else im
            im.filename = str(path)  # as Image.open(path) would have set it
        except Image.DecompressionBombError as exc:
            raise InputError(f"decompression bomb refused by PIL: {exc}") from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise InputError(f"corrupt or truncated image: {exc}") from None
    check_image_values(out)
    note = f"{im.format or 'image'} with {frames} frames: frame 0 used" if frames > 1 else None
    return out, note


def check_image_values(im: Image.Image) -> None:
    """Refuse a floating-point image (PIL mode ``F``: a float TIFF) holding NaN or
    infinity, as tensors are refused: PIL's convert would turn them into pixel values."""
    if im.mode != "F":
        return
    arr = np.asarray(im, dtype=np.float32)
    bad = int((~np.isfinite(arr)).sum())
    if bad:
        nan = int(np.isnan(arr).sum())
        raise InputError(
            f"invalid image: {bad:,} of {arr.size:,} pixels of this floating-point image are "
            f"not finite ({nan:,} NaN, {bad - nan:,} infinite)"
        )


def check_tensor_shape(shape: tuple[int, ...], max_pixels: int) -> None:
    """Refuse a tensor shape before its data is read: an image tensor is 2-D (H, W) or
    3-D (C, H, W) with at most ``max_pixels`` pixels (H*W; HWC is assumed when the first
    dimension is not 1, 3 or 4) and at most 4 values per pixel."""
    if len(shape) not in (2, 3):
        raise InputError(
            f"tensor of shape {tuple(shape)}: an image tensor is 2-D (H, W) or 3-D (C, H, W)"
        )
    if len(shape) == 2 or shape[0] in (1, 3, 4):
        pixels = shape[-1] * shape[-2]
    else:
        pixels = shape[0] * shape[1]
    if pixels > max_pixels or math.prod(shape) > 4 * max_pixels:
        raise InputError(
            f"pixel limit: tensor of shape {tuple(shape)} has {pixels:,} pixels > limit "
            f"{max_pixels:,} (raise it with --max-pixels)"
        )


def _open_npy(path: Path, max_pixels: int) -> torch.Tensor:
    """A .npy tensor whose header (shape, dtype) is checked before any data is read."""
    fmt = np.lib.format
    with os.fdopen(_open_fd(path, "tensor file"), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        try:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = fmt.read_array_header_2_0(f)
            else:
                raise InputError(f"unsupported .npy format version {version}")
        except ValueError as exc:
            raise InputError(f"not a .npy file: {exc}") from None
        if dtype.hasobject:
            raise InputError(".npy file holds Python objects (pickle); refused")
        check_tensor_shape(tuple(shape), max_pixels)
        need, have = math.prod(shape) * dtype.itemsize, size - f.tell()
        if have < need:
            raise InputError(
                f".npy header promises {need:,} bytes of data for shape {tuple(shape)} but "
                f"the file holds {have:,}: truncated or not what it claims"
            )
        f.seek(0)
        try:
            arr = fmt.read_array(f, allow_pickle=False)
            return torch.from_numpy(arr)
        except (ValueError, TypeError, OSError) as exc:
            raise InputError(f"cannot read .npy data: {exc}") from None


def _open_pt(path: Path, max_pixels: int) -> torch.Tensor:
    """A torch.save'd tensor, memory-mapped so that its shape is checked before its data
    is read (weights_only: no code runs); the legacy pre-1.6 format cannot be mapped and
    is refused."""
    os.close(_open_fd(path, "tensor file"))
    try:
        obj: Any = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # any unreadable tensor file is one bad input
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"cannot read tensor file: {first}") from None
    if not isinstance(obj, torch.Tensor):
        raise InputError(f"tensor file holds a {type(obj).__name__}, not a tensor")
    check_tensor_shape(tuple(obj.shape), max_pixels)
    return obj.clone()  # off the mapping, so the file may go away


def check_tensor_values(t: torch.Tensor) -> None:
    """Refuse a float tensor holding NaN or infinity: not an image (NaN != NaN would read as
    a parity difference when it is invalid input); and an integer tensor other than uint8
    whose values leave 0..255 (8-bit pixel values; -500 or 999 is not one)."""
    if t.dtype == torch.bool or t.dtype == torch.uint8 or t.numel() == 0:
        return
    if not (t.is_floating_point() or t.is_complex()):
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi > 255:
            raise InputError(
                f"invalid tensor: {str(t.dtype).replace('torch.', '')} values {lo}..{hi} are "
                "not 8-bit pixel values (0..255); an image tensor holds 0..255"
            )
        return
    bad = int((~torch.isfinite(t)).sum())
    if bad:
        nan = int(torch.isnan(t).sum())
        raise InputError(
            f"invalid tensor: {bad:,} of {t.numel():,} values are not finite ({nan:,} NaN, "
            f"{bad - nan:,} infinite); an image tensor holds finite pixel values"
        )


def open_tensor(path: Path, max_pixels: int) -> torch.Tensor:
    """A ``.npy``, ``.pt`` or ``.pth`` image tensor, its shape and values checked."""
    t = _open_npy(path, max_pixels) if path.suffix == ".npy" else _open_pt(path, max_pixels)
    check_tensor_values(t)
    return t
