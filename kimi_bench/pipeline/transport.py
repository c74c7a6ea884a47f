"""Carriers between processes, as the runtime's CPU feature transport uses them.

- ``pickle``: tensors are pickled inline (multi-node CPU transport).
- ``shm``: each CPU tensor is first copied into a POSIX shared-memory segment
  (``/dev/shm``) and only its name, shape and dtype are pickled (single node), as
  ``ShmPointerMMData`` does; a rank takes it back by cloning it (PR era) or by mapping the
  segment copy-on-write (0.5.23).
- ``broadcast_bytes``: TP rank 0 sends a pickled object to every rank over a gloo group
  (size first, then a uint8 tensor wrapping the bytes without a copy), as
  ``broadcast_pyobj`` does; receivers copy the buffer into ``bytes``.

These are the byte-moving primitives; ``kimi_bench.pipeline`` decides when each runs and
writes the copy ledger.

Segments carry a run-unique prefix so that ``cleanup_segments`` can remove every one a
run made, even after a crash.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

SHM_DIR = Path("/dev/shm")


class TransportError(RuntimeError):
    """A carrier cannot be used on this machine."""


@dataclass(frozen=True)
class ShmRef:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    nbytes: int


def new_prefix() -> str:
    return f"kimibench_{os.getpid()}_{uuid.uuid4().hex[:8]}_"


def _map(name: str, size: int, create: bool) -> mmap.mmap:
    if not SHM_DIR.is_dir():
        raise TransportError("the shm carrier needs POSIX shared memory at /dev/shm")
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(SHM_DIR / name, flags, 0o600)
    try:
        if create:
            os.ftruncate(fd, max(size, 1))
            if hasattr(os, "posix_fallocate"):  # reserve the pages first, as the runtime does
                os.posix_fallocate(fd, 0, max(size, 1))
        return mmap.mmap(fd, max(size, 1))
    finally:
        os.close(fd)


def tensor_to_shm(t: torch.Tensor, prefix: str) -> ShmRef:
    """Copy a contiguous CPU tensor into a new segment (space reserved first, then one copy
    of its bytes), as ``ShmPointerMMData`` does."""
    src = t.detach()
    if not src.is_contiguous():
        raise ValueError("tensor_to_shm takes a contiguous tensor (the caller makes the copy)")
    nbytes = src.numel() * src.element_size()
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    mm = _map(name, nbytes, create=True)
    if nbytes:
        dst = torch.frombuffer(mm, dtype=torch.uint8, count=nbytes)
        dst.copy_(src.view(-1).view(torch.uint8))
        del dst
    mm.close()
    return ShmRef(name, tuple(src.shape), src.dtype, nbytes)


def tensor_from_shm(ref: ShmRef) -> torch.Tensor:
    """Clone a tensor out of a segment (the segment stays until unlinked)."""
    mm = _map(ref.name, ref.nbytes, create=False)
    if ref.nbytes:
        view = torch.frombuffer(mm, dtype=torch.uint8, count=ref.nbytes)
        out = view.clone().view(ref.dtype).reshape(ref.shape)
        del view
    else:
        out = torch.empty(ref.shape, dtype=ref.dtype)
    mm.close()
    return out


def tensor_map_shm(ref: ShmRef) -> torch.Tensor:
    """Map a segment copy-on-write (``mmap.ACCESS_COPY``): no byte is copied; the tensor
    keeps the mapping alive, also after the segment is unlinked."""
    if not SHM_DIR.is_dir():
        raise TransportError("the shm carrier needs POSIX shared memory at /dev/shm")
    if not ref.nbytes:
        return torch.empty(ref.shape, dtype=ref.dtype)
    fd = os.open(SHM_DIR / ref.name, os.O_RDONLY)
    try:
        mm = mmap.mmap(fd, ref.nbytes, access=mmap.ACCESS_COPY)
    finally:
        os.close(fd)
    return (
        torch.frombuffer(mm, dtype=torch.uint8, count=ref.nbytes).view(ref.dtype).reshape(ref.shape)
    )


def unlink(names: Sequence[str]) -> None:
    for n in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SHM_DIR / n)


def list_segments(prefix: str) -> list[str]:
    if not SHM_DIR.is_dir():
        return []
    return sorted(p.name for p in SHM_DIR.iterdir() if p.name.startswith(prefix))


def cleanup_segments(prefix: str) -> list[str]:
    """Unlink every segment with this prefix; returns what was removed."""
    names = list_segments(prefix)
    unlink(names)
    return names


def dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(blob: bytes) -> Any:
    return pickle.loads(blob)


def broadcast_bytes(blob: bytes | None, src: int = 0, group: Any = None) -> bytes:
    """gloo broadcast of a byte string from ``src`` to every rank of ``group``."""
    import torch.distributed as dist

    rank = dist.get_rank()
    if rank == src:
        assert blob is not None
        with warnings.catch_warnings():  # gloo only reads the root's buffer
            warnings.simplefilter("ignore", UserWarning)
            data = torch.frombuffer(blob, dtype=torch.uint8)  # wraps the bytes, no copy
        size = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        size = torch.zeros(1, dtype=torch.int64)
    dist.broadcast(size, src=src, group=group)
    if rank != src:
        data = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(data, src=src, group=group)
    return blob if rank == src and blob is not None else data.numpy().tobytes()
