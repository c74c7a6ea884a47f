"""The shared-memory arena of the ``zero-copy`` arm (proposed, not in the runtime).

One POSIX shared-memory segment per run (``{prefix}arena`` in ``/dev/shm``): a ring of
fixed-size slots, one request per slot, reused across requests. The producer writes each
image's decoded pixels once, straight into its slot; only an ``ArenaRef`` (slot,
generation, offset, shape) travels to the ranks; each owner copies its images from the
slot to its device. With CUDA every rank registers the data region once at start-up
(``cudaHostRegister``: page-locked, read by DMA), timed separately.

The segment's layout (a header page, three int64 tables, the slots) and its geometry
(``ArenaSpec``) are in ``arena_layout``. Every cell has a single writer, so no lock is
needed: a slot is free when every rank has released its current generation. Once every
role has attached the name is unlinked (the mappings live on; nothing is left even after
a SIGKILL); ``close`` also unlinks, and ``procs.Harness.stop`` removes anything with the
run's prefix (crash, Ctrl-C).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from PIL import Image

from kimi_bench.pipeline.arena_layout import (
    ArenaError,
    ArenaFull,
    ArenaRef,
    ArenaSetup,
    ArenaSpec,
)
from kimi_bench.pipeline.transport import SHM_DIR, TransportError


@dataclass(eq=False, repr=False)
class Arena:
    """One process's mapping of the run's arena."""

    name: str
    spec: ArenaSpec
    created: bool
    role: int
    threads: int = 1
    map_ms: float = 0.0
    register_ms: float | None = None
    _mm: Any = None
    _tables: Any = None
    _data: Any = None
    _cursor: int = 0
    _pending: list[Any] = field(default_factory=list)
    _registered: int | None = None
    _pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ life cycle

    @classmethod
    def attach(
        cls, prefix: str, spec: ArenaSpec, *, rank: int | None = None, writer: int | None = None
    ) -> Arena:
        """Create the run's arena or map the one another process created (atomically:
        the creator writes the header under a temporary name and links it into place)."""
        if (rank is None) == (writer is None):
            raise ValueError("attach as exactly one of rank=R or writer=W")
        role = rank if rank is not None else spec.ranks + int(writer)  # type: ignore[arg-type]
        if not 0 <= role < spec.roles:
            raise ValueError(f"role {role} outside the arena's {spec.roles} roles")
        if not SHM_DIR.is_dir():
            raise TransportError("the zero-copy arm needs POSIX shared memory at /dev/shm")
        t0 = time.perf_counter()
        name = f"{prefix}arena"
        fd, created = _open_or_create(name, spec)
        try:
            words = list(np.frombuffer(os.pread(fd, 40, 0).ljust(40, b"\0"), np.int64))
            if words != spec.words() or os.fstat(fd).st_size != spec.nbytes:
                raise ArenaError(
                    f"arena {name} has geometry {[int(w) for w in words[1:]]} (slots, slot "
                    f"bytes, ranks, writers), expected {spec.words()[1:]}"
                )
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mm = mmap.mmap(fd, spec.nbytes, flags=flags)
        finally:
            os.close(fd)
        threads = max(1, min(8, os.cpu_count() or 1))
        arena = cls(name, spec, created, role, threads, _mm=mm)
        arena._tables = np.frombuffer(mm, np.int64, spec.header_bytes // 8)
        arena._data = torch.frombuffer(
            mm, dtype=torch.uint8, count=spec.data_bytes, offset=spec.header_bytes
        )
        arena.map_ms = (time.perf_counter() - t0) * 1e3
        arena._attached[role] = 1
        if int(arena._attached.min()) == 1:  # every process has it: the name can go
            arena.unlink()
        return arena

    def __repr__(self) -> str:
        return f"Arena({self.name!r}, {self.spec}, role={self.role})"

    @property
    def _gen(self) -> Any:
        return self._tables[8 : 8 + self.spec.slots]

    @property
    def _released(self) -> Any:
        s, r = self.spec.slots, self.spec.ranks
        return self._tables[8 + s : 8 + s + r * s].reshape(r, s)

    @property
    def _attached(self) -> Any:
        start = 8 + self.spec.slots * (1 + self.spec.ranks)
        return self._tables[start : start + self.spec.roles]

    @property
    def registered(self) -> bool:
        return self._registered is not None

    def unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SHM_DIR / self.name)

    def close(self, *, unlink: bool = True) -> None:
        """Unregister, unmap and (by default) unlink. Views handed out must be gone."""
        self.unregister_cuda()
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._tables = self._data = None
        if self._mm is not None:
            with contextlib.suppress(BufferError):  # a live view: the OS unmaps at exit
                self._mm.close()
            self._mm = None
        if unlink:
            self.unlink()

    def __enter__(self) -> Arena:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ slots

    def is_free(self, slot: int) -> bool:
        return int(self._released[:, slot].min()) >= int(self._gen[slot])

    def acquire(self, timeout_s: float = 60.0, poll_s: float = 1e-4) -> int:
        """Take this writer's next free slot (ring order); its new generation is
        ``generation(slot)``. Waits while every slot is held; ``ArenaFull`` after
        ``timeout_s`` names the ranks that did not release."""
        writer = self.role - self.spec.ranks
        if writer < 0:
            raise ArenaError("only a writer (producer) takes slots")
        mine = list(range(writer, self.spec.slots, self.spec.writers))
        deadline = time.perf_counter() + timeout_s
        while True:
            for k in range(len(mine)):
                slot = mine[(self._cursor + k) % len(mine)]
                if self.is_free(slot):
                    self._cursor = (self._cursor + k + 1) % len(mine)
                    self._gen[slot] = int(self._gen[slot]) + 1
                    return slot
            if time.perf_counter() > deadline:
                held = self._released[:, mine] < self._gen[mine]
                late = [int(r) for r in np.flatnonzero(held.any(axis=1))]
                raise ArenaFull(
                    f"no free arena slot for writer {writer} after {timeout_s:.0f} s: "
                    f"rank(s) {late} did not release their slots"
                )
            time.sleep(poll_s)

    def generation(self, slot: int) -> int:
        return int(self._gen[slot])

    def abandon(self, slot: int) -> None:
        """The writer gives back a slot whose metadata never left (a failed request)."""
        self._gen[slot] = int(self._gen[slot]) - 1

    def release(self, slot: int, gen: int) -> None:
        """This rank is done with generation ``gen`` of ``slot`` (it writes its own cell)."""
        if self.role >= self.spec.ranks:
            raise ArenaError("only a rank releases slots")
        if int(self._released[self.role, slot]) < gen:
            self._released[self.role, slot] = gen

    # ------------------------------------------------------------------ bytes

    def region(self, slot: int, offset: int, nbytes: int) -> torch.Tensor:
        """A uint8 view (no copy) of ``nbytes`` at ``offset`` inside ``slot``."""
        if offset < 0 or offset + nbytes > self.spec.slot_bytes:
            raise ArenaError(
                f"the request needs {offset + nbytes} bytes but an arena slot holds "
                f"{self.spec.slot_bytes}; size the arena for the largest request"
            )
        start = slot * self.spec.slot_bytes + offset
        return self._data[start : start + nbytes]

    def view(self, ref: ArenaRef) -> torch.Tensor:
        """The image's bytes in place, shaped as written (no copy)."""
        return self.region(ref.slot, ref.offset, ref.nbytes).view(ref.shape)

    def paste(self, slot: int, offset: int, img: Any) -> None:
        """Copy a decoded PIL image (4-byte pixels: RGB, RGBX or RGBA) into the slot: the
        target is a PIL image whose buffer *is* the slot (``Image.frombuffer`` maps RGBX
        and RGBA without a copy); PIL's core ``paste`` is one ``memcpy`` per row (the
        public ``Image.paste`` would first copy the read-only mapped target)."""
        img.load()
        (w, h), mode = img.size, "RGBA" if img.mode == "RGBA" else "RGBX"
        buf = self.region(slot, offset, 4 * w * h).numpy()
        target = Image.frombuffer(mode, (w, h), buf, "raw", mode, 0, 1)
        target.im.paste(img.im, (0, 0, w, h))

    def run_parallel(self, jobs: Sequence[Any]) -> None:
        """Run the writes (callables) in up to ``threads`` threads (PIL's paste and torch's
        copy release the GIL)."""
        if len(jobs) < 2 or self.threads < 2:
            for j in jobs:
                j()
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="arena")
        for f in [self._pool.submit(j) for j in jobs]:
            f.result()

    # ------------------------------------------------------------------ CUDA

    def register_cuda(self) -> float:
        """Page-lock the data region for the current CUDA device's context, once;
        returns (and keeps) the time it took in ms."""
        if self._registered is not None:
            return float(self.register_ms or 0.0)
        cudart = torch.cuda.cudart()
        ptr = int(self._data.data_ptr())
        t0 = time.perf_counter()
        portable = 1  # cudaHostRegisterPortable: page-locked for every CUDA context
        try:
            torch.cuda.check_error(cudart.cudaHostRegister(ptr, self.spec.data_bytes, portable))
        except RuntimeError as exc:
            raise ArenaError(
                f"cudaHostRegister of the zero-copy arena ({self.spec.data_bytes / 1e6:.0f} MB) "
                f"failed: {exc}"
            ) from None
        self.register_ms = (time.perf_counter() - t0) * 1e3
        self._registered = ptr
        return self.register_ms

    def unregister_cuda(self) -> None:
        if self._registered is not None:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaHostUnregister(self._registered)
            self._registered = None

    def after_copy(self, device: torch.device) -> None:
        """Remember the point after an asynchronous copy out of the arena."""
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(device))
        self._pending.append(ev)

    def wait_copies(self) -> None:
        """Block until every copy out of the arena of this process has completed."""
        for ev in self._pending:
            ev.synchronize()
        self._pending.clear()

    def setup(self) -> ArenaSetup:
        """What the start-up cost, for the report (not in any per-request stage)."""
        return {
            "arena_bytes": self.spec.nbytes,
            "slots": self.spec.slots,
            "slot_bytes": self.spec.slot_bytes,
            "created": self.created,
            "map_ms": self.map_ms,
            "registered": self.registered,
            "register_ms": self.register_ms,
            "stage_threads": self.threads,
        }


def _open_or_create(name: str, spec: ArenaSpec) -> tuple[int, bool]:
    """An fd on the arena, creating it (header written) if it does not exist yet."""
    path = SHM_DIR / name
    with contextlib.suppress(FileNotFoundError):
        return os.open(path, os.O_RDWR), False
    tmp = SHM_DIR / f"{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, spec.nbytes)
        if hasattr(os, "posix_fallocate"):  # reserve the pages now, not on first touch
            try:
                os.posix_fallocate(fd, 0, spec.nbytes)
            except OSError as exc:
                free = os.statvfs(SHM_DIR)
                raise ArenaError(
                    f"cannot reserve the zero-copy arena ({spec.nbytes / 1e6:.0f} MB) in "
                    f"{SHM_DIR}: {exc.strerror}; {free.f_bavail * free.f_frsize / 1e6:.0f} MB "
                    "free there (enlarge /dev/shm, e.g. docker --shm-size)"
                ) from None
        os.pwrite(fd, np.asarray(spec.words(), dtype=np.int64).tobytes(), 0)
        try:
            os.link(tmp, path)
            return fd, True
        except FileExistsError:  # another process won the race: use its arena
            os.close(fd)
            return os.open(path, os.O_RDWR), False
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def attach_run_arena(prefix: str, spec: ArenaSpec | None, **role: int) -> Arena | None:
    """This process's mapping of the run's arena as ``rank=R`` or ``writer=W``; None when
    the run has no arena (``spec`` None: no zero-copy arm)."""
    return None if spec is None else Arena.attach(prefix, spec, **role)
