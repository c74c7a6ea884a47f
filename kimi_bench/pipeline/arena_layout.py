"""The geometry of the ``zero-copy`` arm's shared-memory arena (``arena``), computed the
same by every process of a run, and the reference that travels instead of the pixels.

Layout of the segment: a header page (magic, geometry), then three int64 tables, then the
slots.

- ``gen[slot]``: the generation of the slot's current content; written only by the slot's
  producer (slot ``s`` belongs to writer ``s % writers``).
- ``released[rank, slot]``: the newest generation rank ``rank`` is done with; written only
  by that rank (non-owners at once, owners once their copy completed).
- ``attached[role]``: 1 once a process (ranks first, then writers) mapped the arena.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

import numpy as np

PAGE = 4096
ALIGN = 256  # images start on 256-byte boundaries inside a slot
MAGIC = 0x4B42_4152_454E_4131  # "KBARENA1"
DEFAULT_BUDGET = 2 << 30  # bytes of slots a serve-ab run may map at most
Layout = Literal["hwc", "chw"]


class ArenaSetup(TypedDict):
    """What a process's arena start-up cost (``Arena.setup``; reported apart from stages)."""

    arena_bytes: int
    slots: int
    slot_bytes: int
    created: bool
    map_ms: float
    registered: bool
    register_ms: float | None
    stage_threads: int


class ArenaError(RuntimeError):
    """The arena cannot be used as asked (bad geometry, a request too large)."""


class ArenaFull(ArenaError):
    """No slot of this writer was released in time."""


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class ArenaSpec:
    """Geometry of an arena; every process of a run computes the same one."""

    slots: int
    slot_bytes: int
    ranks: int
    writers: int = 1

    def __post_init__(self) -> None:
        if min(self.slots, self.slot_bytes, self.ranks, self.writers) < 1:
            raise ArenaError(f"arena needs positive slots, sizes, ranks and writers: {self}")
        if self.slots < self.writers:
            raise ArenaError(f"{self.slots} slots cannot be shared by {self.writers} writers")
        object.__setattr__(self, "slot_bytes", _round_up(self.slot_bytes, PAGE))

    @property
    def roles(self) -> int:
        return self.ranks + self.writers

    @property
    def header_bytes(self) -> int:
        cells = 8 + self.slots + self.ranks * self.slots + self.roles
        return _round_up(8 * cells, PAGE)

    @property
    def data_bytes(self) -> int:
        return self.slots * self.slot_bytes

    @property
    def nbytes(self) -> int:
        return self.header_bytes + self.data_bytes

    def words(self) -> list[int]:
        return [MAGIC, self.slots, self.slot_bytes, self.ranks, self.writers]


def image_bytes(width: int, height: int) -> int:
    """Bytes an image takes in a slot (PIL keeps RGB in 4 bytes per pixel), aligned."""
    return _round_up(width * height * 4, ALIGN)


def spec_for(
    sizes: Sequence[tuple[int, int]],
    ranks: int,
    *,
    requests: int,
    writers: int = 1,
    budget: int = DEFAULT_BUDGET,
) -> ArenaSpec:
    """Slots large enough for one request of these (width, height) images; one slot per
    request that can be in flight, at most ``budget`` bytes, at least two per writer."""
    slot = max(PAGE, sum(image_bytes(w, h) for w, h in sizes))
    want = max(2 * writers, min(requests, budget // slot))
    return ArenaSpec(writers * math.ceil(want / writers), slot, ranks, writers)


@dataclass(frozen=True)
class ArenaRef:
    """What travels instead of the pixels: where an image is, and how to read it."""

    slot: int
    gen: int
    offset: int  # bytes from the start of the slot
    shape: tuple[int, int, int]  # (H, W, 4) for "hwc", (C, H, W) for "chw"
    layout: Layout
    channels: int  # channels the owner keeps (3: drop PIL's padding byte; 4: alpha)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape))
