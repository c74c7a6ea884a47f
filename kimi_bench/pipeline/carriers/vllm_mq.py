"""``vllm-mq``: how vLLM 0.33 moves a request's patches to every worker (SPEC section 13;
paths under ``vllm/``), the only carrier of the ``vllm-0.33`` runtime profile.

- API server -> EngineCore (``encode``/``decode``, the recipe's hop to rank 0):
  ``v1/serial_utils.py``'s msgpack encoder, tensors of 256 B or more as out-of-band frames
  (no copy), ZMQ ``send_multipart(copy=False)``; EngineCore rebuilds each with
  ``torch.frombuffer`` (no copy). The socket's kernel copies are the hop's ``ipc`` row.
- EngineCore -> every worker (``broadcast``: rank 0 plays EngineCore and worker 0):
  ``shm_broadcast.py`` ``MessageQueue.enqueue``: a message below the profile's
  ``ring_max_bytes`` (16 MiB) is copied once into the shared-memory ring and every reader
  copies it out; at or above it, one ZMQ delivery per reader and a zero-copy rebuild.
  With the opt-in tensor arena (``+arena``) each tensor of ``arena_min_bytes`` (8 MiB)
  or more is first copied once into an arena slot; readers map it (``take``: no copy).

Where the emulation differs from vLLM (the ledger's ``mirrors`` say so): pickle protocol 5
with out-of-band buffers stands in for msgpack; gloo broadcasts stand in for the ZMQ
deliveries to ranks 1..N-1 and a host copy for the delivery to worker 0 (a process of its
own in vLLM, rank 0 itself here); an arena slot is a fresh shared-memory segment (space
reserved first), not a slot of a pre-allocated arena, and a mapped slot is not
page-locked; the ring's readiness flags are a small header broadcast (no pixel bytes).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.runtime import get_profile
from kimi_bench.pipeline import mq
from kimi_bench.pipeline.carriers import Carrier, register_carrier
from kimi_bench.pipeline.step import Step
from kimi_bench.pipeline.transport import (
    ShmRef,
    cleanup_segments,
    tensor_map_shm,
    tensor_to_shm,
)
from kimi_bench.pipeline.vllm_steps import ARENA_VIEW_KEY

SERIAL = "v1/serial_utils.py"
ENQUEUE = "shm_broadcast.py MessageQueue.enqueue"
DEQUEUE = "shm_broadcast.py MessageQueue.dequeue"
ARENA = "shm_tensor_arena.py"
COUNT = struct.Struct("<I")


class VllmMessageQueue(Carrier):
    """msgpack/ZMQ to EngineCore, then ``MessageQueue`` (ring or ZMQ) to every worker."""

    spans_nodes = False
    serialize_op = "msgpack"
    broadcasts_in_turn = True
    ipc_mirrors = "ZMQ send_multipart(copy=False) to EngineCore (kernel copies)"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._rings: dict[str, mq.Ring] = {}  # this process's ring and readers' mappings
        self._own: mq.Ring | None = None
        self._pending: list[str] = []  # segment names to unlink after the take's barrier
        self._unlink_now = True  # in one process: only after the last rank's take

    def check(self, arms: Sequence[Any], runtime: str) -> None:
        get_profile(runtime).check_arms([a.name for a in arms], self.name)

    def note(self) -> str | None:
        return (
            "vllm-mq emulates vLLM 0.33's carriers: pickle protocol 5 with out-of-band "
            "buffers stands in for msgpack, gloo for the ZMQ deliveries to workers 1..N-1 and "
            "a host copy for the delivery to worker 0 (rank 0 also plays EngineCore). The "
            "vllm-uint8 arm gets the images encoded (generated ones as JPEG q85), as vLLM's API "
            "server does: its decode is part of its producer stage."
        )

    def leftovers(self, pids: Iterable[int]) -> list[str]:
        out: list[str] = []
        for pid in pids:
            out += cleanup_segments(f"{mq.RING_PREFIX}{pid}_")
            out += cleanup_segments(f"{mq.ARENA_PREFIX}{pid}_")
        return out

    # ------------------------------------------------------- API server -> EngineCore
    def wrap(self, step: Step, items: list[MMItem], prefix: str) -> Any:
        return list(items)  # the request's patches as they are: the encoder frames them

    def encode(self, step: Step, payload: Any) -> list[Any]:
        meta, frames = mq.pack(payload)
        step.ledger.add(
            "serialize", "msgpack", "host", "host", len(meta),
            f"{SERIAL} MsgpackEncoder [pickle protocol 5 stands in]",
        )  # fmt: skip
        step.ledger.add(
            "serialize", "oob_frame", "host", "host", mq.nbytes(frames),
            f"{SERIAL}: tensors >= 256 B as out-of-band frames", count=len(frames),
        )  # fmt: skip
        return [COUNT.pack(len(frames)) + meta, *frames]

    def decode(self, step: Step, get: Callable[[], Any], stage: str, mirrors: str) -> Any:
        head = memoryview(get())
        (n,) = COUNT.unpack(head[: COUNT.size])
        frames = [get() for _ in range(n)]
        meta = head[COUNT.size :]
        return _rebuild(step, stage, "unmsgpack", meta, frames, f"{SERIAL} MsgpackDecoder")

    # ------------------------------------------------------ EngineCore -> every worker
    def broadcast(self, step: Step, obj: Any, rank: int, world: int, group: Any = None) -> Any:
        wire = mq.Mailbox(group) if isinstance(group, list) else mq.GlooWire(group)
        self._unlink_now = not isinstance(group, list) or rank == world - 1
        local: list[Any] = []
        if rank == 0:
            header, local = self._enqueue(step, obj, world, wire)
        else:
            header = wire.header(None, rank)
        mode, name, size, lengths = header
        if mode == "ring":
            ring = self._ring(name, size)
            frames = ring.read(lengths)
            step.ledger.add(
                "broadcast", "ring_copy_out", "shm", "host", sum(lengths), f"{DEQUEUE}: copy out"
            )
        else:
            frames = local if rank == 0 else wire.frames(None, lengths, rank)
        return _rebuild(step, "broadcast", "unpickle", frames[0], frames[1:], f"{DEQUEUE}: loads")

    def _enqueue(
        self, step: Step, obj: Any, world: int, wire: Any
    ) -> tuple[tuple[str, str, int, list[int]], list[Any]]:
        """EngineCore's side: the arena copies, the metadata, then the ring or the
        deliveries. Returns the header and rank 0's own (worker 0's) frames."""
        meta, frames = mq.pack(obj, self._arena_slot(step) if step.profile.arena else None)
        step.ledger.add(
            "broadcast", "pickle", "host", "host", len(meta),
            f"{ENQUEUE}: pickle (buffers out of band)",
        )  # fmt: skip
        all_frames: list[Any] = [meta, *frames]
        lengths = [memoryview(f).nbytes for f in all_frames]
        total = sum(lengths)
        limit = step.profile.ring_max_bytes
        if total < limit:
            ring = self._own_ring(limit)
            ring.write(all_frames)
            step.ledger.add(
                "broadcast", "ring_copy_in", "host", "shm", total,
                f"{ENQUEUE}: below {limit} B, one copy into the shared-memory ring",
            )  # fmt: skip
            header = ("ring", ring.name, ring.size, lengths)
            wire.header(header, 0)
            return header, []
        header = ("zmq", "", 0, lengths)
        wire.header(header, 0)
        wire.frames(all_frames, lengths, 0)
        if world > 1:
            step.ledger.add(
                "broadcast", "zmq_delivery", "host", "wire", total * (world - 1),
                f"{ENQUEUE}: at or above {limit} B, ZMQ to each reader [gloo stands in]",
                count=world - 1,
            )  # fmt: skip
        local = [memoryview(bytearray(f)) for f in all_frames]
        step.ledger.add(
            "broadcast", "zmq_delivery", "host", "host", total,
            f"{ENQUEUE}: ZMQ to worker 0 [rank 0 is EngineCore too: a host copy stands in]",
        )  # fmt: skip
        return header, local

    def _arena_slot(self, step: Step) -> Callable[[torch.Tensor], ShmRef | None]:
        """With the arena on: each tensor of ``arena_min_bytes`` or more copied once into a
        slot; its reference travels instead."""

        def slot(t: torch.Tensor) -> ShmRef | None:
            if tensor_bytes(t) < step.profile.arena_min_bytes:
                return None
            ref = tensor_to_shm(t.contiguous(), f"{mq.ARENA_PREFIX}{os.getpid()}_")
            step.ledger.add(
                "broadcast", "mq_arena_copy_in", "host", "shm", ref.nbytes,
                f"{ARENA}: one copy into a slot [a fresh segment stands in for the slot]",
            )  # fmt: skip
            return ref

        return slot

    def _own_ring(self, size: int) -> mq.Ring:
        if self._own is None or self._own.size < size:  # one chunk of the profile's size
            self._own = mq.Ring.new(size)
            self._rings[self._own.name] = self._own
            self._pending.append(self._own.name)
        return self._own

    def _ring(self, name: str, size: int) -> mq.Ring:
        if name not in self._rings:
            self._rings[name] = mq.Ring(name, size, create=False)
            self._pending.append(name)
        return self._rings[name]

    # ------------------------------------------------------------------- workers
    def take(self, step: Step, packed: Any) -> tuple[list[MMItem], list[str]]:
        """A worker's items: arena slots mapped (no copy), the rest as received."""
        out: list[MMItem] = []
        for it in packed:
            f: Any = it.feature
            if isinstance(f, ShmRef):
                step.ledger.add(
                    "take_copy", "map", "shm", "host", f.nbytes,
                    f"{ARENA}: a reader maps its slot [not page-locked here]",
                )  # fmt: skip
                msd = dict(it.model_specific_data) | {ARENA_VIEW_KEY: True}
                out.append(MMItem(tensor_map_shm(f), msd))
                self._pending.append(f.name)
            else:
                out.append(it)
        if not self._unlink_now:
            return out, []
        names, self._pending = self._pending, []
        return out, names

    def holds_segments(self, packed: Any) -> bool:
        return bool(self._pending) or any(isinstance(it.feature, ShmRef) for it in packed)


def _rebuild(
    step: Step, stage: str, op: str, meta: Any, frames: Sequence[Any], mirrors: str
) -> Any:
    """The message back: its metadata decoded, each frame a tensor over its bytes."""
    obj = mq.unpack(meta, frames)
    step.ledger.add(stage, op, "host", "host", memoryview(meta).nbytes, mirrors)
    if frames:
        step.ledger.add(
            stage, "frombuffer", "host", "host", mq.nbytes(frames),
            "torch.frombuffer over each frame (zero-copy rebuild)", count=len(frames),
        )  # fmt: skip
    return obj


register_carrier("vllm-mq", VllmMessageQueue)
