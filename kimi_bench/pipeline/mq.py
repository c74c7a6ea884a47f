"""Byte-moving primitives of vLLM's carriers (``carriers.vllm_mq`` writes the ledger):

- messages with tensors out of band (``pack``/``unpack``): the metadata is serialized, each
  CPU tensor of ``OOB_MIN_BYTES`` or more, wherever it sits in the message, travels as a
  frame of its own bytes, never copied into the metadata, and comes back as a view of the
  received frame (vLLM's msgpack encoder does this with ``msgpack`` ext types; pickle
  protocol 5's out-of-band buffers stand in here, the same copies);
- ``Ring``: a shared-memory buffer one writer copies a message into and every reader
  copies it out of (``MessageQueue``'s ring: one chunk of ``max_chunk_bytes``);
- ``GlooWire`` / ``Mailbox``: how rank 0 hands the other ranks a header and frames, over
  gloo in real processes or through a list when every rank runs in one process.
"""

from __future__ import annotations

import io
import mmap
import os
import pickle
import uuid
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from kimi_bench.pipeline.transport import SHM_DIR, TransportError

OOB_MIN_BYTES = 256  # v1/serial_utils.py: smaller tensors go inline
RING_PREFIX = "kimibench_vllmring_"
ARENA_PREFIX = "kimibench_vllmarena_"


def _tensor(buf: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor over a received frame's bytes (``torch.frombuffer``: no copy)."""
    if not memoryview(buf).nbytes:
        return torch.empty(shape, dtype=dtype)
    with warnings.catch_warnings():  # a read-only frame: the tensor is never written
        warnings.simplefilter("ignore", UserWarning)
        flat = torch.frombuffer(buf, dtype=torch.uint8)
    return flat.view(dtype).reshape(shape)


def _as_is(obj: Any) -> Any:
    return obj


class _OutOfBand(pickle.Pickler):
    """Pickles anything; a CPU tensor of ``OOB_MIN_BYTES`` or more leaves as an
    out-of-band frame over its own memory (``divert`` may first swap it for another
    object, e.g. an arena slot's reference)."""

    def __init__(self, file: Any, bufs: list[pickle.PickleBuffer], divert: Any) -> None:
        super().__init__(file, protocol=5, buffer_callback=bufs.append)
        self.divert = divert

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, torch.Tensor) or obj.device.type != "cpu":
            return NotImplemented
        if obj.numel() * obj.element_size() < OOB_MIN_BYTES:
            return NotImplemented
        if self.divert is not None and (other := self.divert(obj)) is not None:
            return _as_is, (other,)  # the other object, pickled as it is
        flat = obj.contiguous().reshape(-1).view(torch.uint8).numpy()
        return _tensor, (pickle.PickleBuffer(flat.data), obj.dtype, tuple(obj.shape))


def pack(obj: Any, divert: Any = None) -> tuple[bytes, list[memoryview]]:
    """The metadata and the out-of-band frames (views of the tensors' memory, no copy);
    ``divert(tensor)``: an object to send instead of a large tensor, or None."""
    bufs: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    _OutOfBand(out, bufs, divert).dump(obj)
    return out.getvalue(), [b.raw() for b in bufs]


def unpack(meta: Any, frames: Sequence[Any]) -> Any:
    """The object back, each large tensor a view of its frame."""
    return pickle.loads(meta, buffers=frames)


def nbytes(frames: Sequence[Any]) -> int:
    return sum(memoryview(f).nbytes for f in frames)


class Ring:
    """One shared-memory chunk: a writer copies a message in, each reader copies it out."""

    def __init__(self, name: str, size: int, *, create: bool) -> None:
        if not SHM_DIR.is_dir():
            raise TransportError("vLLM's MessageQueue ring needs POSIX shared memory at /dev/shm")
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(SHM_DIR / name, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.name, self.size = name, size

    @classmethod
    def new(cls, size: int) -> Ring:
        return cls(f"{RING_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}", size, create=True)

    def write(self, frames: Sequence[Any]) -> None:
        """One copy of every frame, back to back, into the chunk."""
        view = np.frombuffer(self.mm, dtype=np.uint8)
        at = 0
        for f in frames:
            src = np.frombuffer(f, dtype=np.uint8)
            view[at : at + src.size] = src
            at += src.size

    def read(self, lengths: Sequence[int]) -> list[memoryview]:
        """A reader's one copy of the message out of the chunk, as its frames."""
        total = sum(lengths)
        out = bytearray(total)
        out[:] = memoryview(self.mm)[:total]
        whole, frames, at = memoryview(out), [], 0
        for n in lengths:
            frames.append(whole[at : at + n])
            at += n
        return frames


class GlooWire:
    """Rank 0 to every other rank over gloo (``group``: None = the default group)."""

    def __init__(self, group: Any = None) -> None:
        self.group = group

    def header(self, obj: Any, rank: int) -> Any:
        box = [obj if rank == 0 else None]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def frames(self, frames: Sequence[Any] | None, lengths: Sequence[int], rank: int) -> list[Any]:
        """Every frame broadcast from rank 0; a receiver's frames are the tensors gloo
        wrote into (no further copy)."""
        out: list[Any] = []
        for i, n in enumerate(lengths):
            if rank == 0:
                assert frames is not None
                with warnings.catch_warnings():  # gloo only reads the root's buffer
                    warnings.simplefilter("ignore", UserWarning)
                    t = torch.frombuffer(frames[i], dtype=torch.uint8)
            else:
                t = torch.empty(n, dtype=torch.uint8)
            dist.broadcast(t, src=0, group=self.group)
            out.append(t.numpy().data)
        return out


class Mailbox:
    """Every rank in one process, rank 0 first: it posts, the others take their copy."""

    def __init__(self, box: list[Any]) -> None:
        self.box = box

    def header(self, obj: Any, rank: int) -> Any:
        if rank == 0:
            self.box[:] = [obj, []]
        return self.box[0]

    def frames(self, frames: Sequence[Any] | None, lengths: Sequence[int], rank: int) -> list[Any]:
        if rank == 0:
            self.box[1] = list(frames or [])
            return self.box[1]
        return [memoryview(bytearray(f)) for f in self.box[1]]  # a delivery: one copy
