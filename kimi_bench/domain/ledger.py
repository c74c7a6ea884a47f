"""The copy ledger: every operation of the pipeline that moves pixel bytes, per arm and stage.

Each entry says *what* moved the bytes (``op``), *from where to where* (``src`` -> ``dst``:
``pil``, ``host``, ``shm``, ``device``, ``wire``), how many bytes in how many operations,
and which runtime function it mirrors. The ledger is written by the pipeline's steps
(``kimi_bench.pipeline``) as they run, so it is a record of what the emulation did, not a
hand-summed estimate. Ledgers of several processes (producer, ranks) merge by addition.

Device-internal kernels (resize, normalize, the BF16 cast) are compute, not transport, and
are not listed. A ``map`` entry (0.5.23's copy-on-write mapping of a shared-memory segment)
moves no byte; it is listed with its size and ``copies=False`` so that readers see it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar


class CopyRow(TypedDict):
    """One ledger entry as a report row (``Ledger.rows``; a run's ``copies``)."""

    stage: str
    op: str
    src: str
    dst: str
    bytes: int
    count: int
    copies: bool
    mirrors: str


R = TypeVar("R", bound=Mapping[str, Any])

# op -> (what it is, whether it copies bytes)
OPS: dict[str, tuple[str, bool]] = {
    "decode": (
        "PIL decode of an encoded image (Image.open + load): encoded bytes -> its pixel "
        "buffer (bytes: the decoded pixels)",
        True,
    ),
    "convert": ("PIL Image.convert to RGB/RGBA (a new image buffer)", True),
    "to_numpy": ("np.array(image, copy=True): PIL buffer -> HWC uint8 array", True),
    "hwc_to_chw": ("HWC -> CHW copy (.contiguous() of the permuted view)", True),
    "channel_repeat": ("one channel repeated to three", True),
    "h2d": ("host -> device copy", True),
    "d2h": ("device -> host copy (.cpu())", True),
    "shm_copy_in": ("copy of contiguous bytes into a POSIX shared-memory segment", True),
    "shm_fallocate": (
        "posix_fallocate of a new shared-memory segment: its pages reserved (zero-filled by "
        "the kernel) before the copy in; no pixel byte copied",
        False,
    ),
    "pickle": ("pickle.dumps (tensor bytes inline, or shm metadata only)", True),
    "ipc": ("pipe / ZMQ send of a pickled blob to another process", True),
    "unpickle": ("pickle.loads (rebuilds tensors from inline bytes)", True),
    "gloo_broadcast": ("gloo broadcast of the pickled blob to the other ranks", True),
    "bytes_copy": ("receiver's bytes() of the broadcast buffer", True),
    "clone": ("receiver clones a tensor out of a shared-memory segment", True),
    "map": ("copy-on-write mmap of a shared-memory segment (no copy)", False),
    "sha256": ("SHA-256 pass over host bytes (reads them, no copy)", False),
    "gpu_hash": ("the device hash kernel over a feature's bytes (reads them, no copy)", False),
    "hash_concat": ("torch.concat of a device feature before its hash (a device copy)", True),
    "hash_flatten": (
        "x.flatten() of a non-contiguous host feature before its SHA-256 (a host copy)",
        True,
    ),
    "cache_hit": (
        "preprocess-cache hit: the stored CPU feature is reused (no decode, preprocessing, "
        "hash or producer copy)",
        False,
    ),
    "cache_store": ("preprocess-cache miss: the CPU feature is stored (no copy)", False),
    "arena_copy_in": (
        "zero-copy arm (proposed, not in the runtime): one copy of an image's decoded "
        "pixels straight into its slot of the shared-memory arena",
        True,
    ),
    # vLLM 0.33 (SPEC section 13)
    "exif_transpose": (
        "ImageOps.exif_transpose: the image rotated into a new buffer, or copied when it "
        "has no orientation to apply",
        True,
    ),
    "composite": ("a new RGB image with transparency composited over white (PIL)", True),
    "pil_resize": ("PIL resize in uint8 into a new image buffer", True),
    "patchify": ("zero padding and one write into (P, 3, p, p) patches", True),
    "blake3": ("the identity digest's pass over the encoded bytes (reads them, no copy)", False),
    "msgpack": ("msgpack encode of a message's metadata (tensors travel out of band)", True),
    "oob_frame": ("a tensor handed to the socket as an out-of-band frame (no copy)", False),
    "unmsgpack": ("msgpack decode of a message's metadata", True),
    "frombuffer": ("torch.frombuffer over a received frame (a view, no copy)", False),
    "ring_copy_in": ("one copy of a message into the shared-memory ring", True),
    "ring_copy_out": ("a reader's copy of a message out of the shared-memory ring", True),
    "zmq_delivery": ("a message's frames delivered to one reader over a socket", True),
    "mq_arena_copy_in": ("one copy of a tensor into a slot of vLLM's tensor arena", True),
    "pinned_staging": ("a copy into a new pinned (page-locked) host buffer", True),
    "nccl_all_gather": ("NCCL all-gather of the padded encoder outputs (bytes sent)", True),
    "nccl_broadcast": ("NCCL broadcast of a single image's encoder output by its owner", True),
    "gloo_all_gather": ("gloo all-gather of the padded encoder outputs (bytes sent)", True),
    "gather_metadata": (
        "metadata-only gather (ranks share a device): patch counts over gloo; the encoder "
        "outputs, listed with their size, are not moved",
        False,
    ),
}
PLACES = ("pil", "host", "shm", "device", "wire")


@dataclass(frozen=True)
class CopyKey:
    stage: str
    op: str
    src: str
    dst: str
    mirrors: str


@dataclass
class Ledger:
    """Bytes and operation counts per (stage, op, src, dst, mirrored runtime function)."""

    entries: dict[CopyKey, list[int]] = field(default_factory=dict)

    def add(
        self, stage: str, op: str, src: str, dst: str, nbytes: int, mirrors: str, count: int = 1
    ) -> None:
        if op not in OPS:
            raise ValueError(f"unknown ledger op {op!r}")
        if src not in PLACES or dst not in PLACES:
            raise ValueError(f"unknown place in {src!r} -> {dst!r}")
        if count <= 0:
            return
        slot = self.entries.setdefault(CopyKey(stage, op, src, dst, mirrors), [0, 0])
        slot[0] += int(nbytes)
        slot[1] += int(count)

    def merge(self, other: Ledger | Iterable[Mapping[str, Any]]) -> Ledger:
        rows = other.rows() if isinstance(other, Ledger) else other
        for r in rows:
            self.add(r["stage"], r["op"], r["src"], r["dst"], r["bytes"], r["mirrors"], r["count"])
        return self

    def rows(self) -> list[CopyRow]:
        """One dict per entry, in insertion order (the order the pipeline ran them)."""
        return [
            CopyRow(
                stage=k.stage,
                op=k.op,
                src=k.src,
                dst=k.dst,
                bytes=v[0],
                count=v[1],
                copies=OPS[k.op][1],
                mirrors=k.mirrors,
            )
            for k, v in self.entries.items()
        ]

    def clear(self) -> None:
        self.entries.clear()

    def copied_bytes(self, stage: str | None = None) -> int:
        """Bytes actually copied (``map`` entries excluded), in one stage or in all."""
        return sum(
            v[0]
            for k, v in self.entries.items()
            if OPS[k.op][1] and (stage is None or k.stage == stage)
        )

    def by_stage(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for k, v in self.entries.items():
            if OPS[k.op][1]:
                out[k.stage] = out.get(k.stage, 0) + v[0]
        return out

    def totals(self) -> dict[str, Any]:
        """Per-arm totals: copied bytes, and bytes per destination and per op."""
        per_op: dict[str, int] = {}
        per_dst: dict[str, int] = {}
        for k, v in self.entries.items():
            if not OPS[k.op][1]:
                continue
            per_op[k.op] = per_op.get(k.op, 0) + v[0]
            per_dst[k.dst] = per_dst.get(k.dst, 0) + v[0]
        return {
            "copied_bytes": self.copied_bytes(),
            "operations": sum(v[1] for k, v in self.entries.items() if OPS[k.op][1]),
            "bytes_by_op": per_op,
            "bytes_by_destination": per_dst,
            "h2d_bytes": per_op.get("h2d", 0),
            "d2h_bytes": per_op.get("d2h", 0),
        }


def tensor_bytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def sort_copies(rows: Iterable[R], order: Sequence[str]) -> list[R]:
    """Ledger rows in pipeline order (``order``: the stage names); stable within a stage."""
    rank = {s: i for i, s in enumerate(order)}
    return sorted(rows, key=lambda r: rank.get(r["stage"], len(rank)))


HASH_OPS = ("sha256", "gpu_hash")  # passes over bytes to hash them (no copy)


def hash_and_cache(rows: Iterable[Mapping[str, Any]], cache_on: bool) -> dict[str, Any]:
    """From ledger rows: the producer's preprocess-cache hits and misses (``None`` when the
    runtime has no cache on), the bytes its feature hash read and the bytes it copied to
    do so (SPEC section 12), and the content digests' bytes."""
    rows = list(rows)
    count = lambda op, stage=None: sum(  # noqa: E731
        r["count"] for r in rows if r["op"] == op and (stage is None or r["stage"] == stage)
    )
    total = lambda ops, stage: sum(  # noqa: E731
        r["bytes"] for r in rows if r["op"] in ops and r["stage"] == stage
    )
    hits, digests = count("cache_hit"), count("sha256", "producer")
    return {
        "cache_hits": hits if cache_on else None,
        "cache_misses": digests - hits if cache_on else None,
        "cache_reused_bytes": total(("cache_hit",), "producer") if cache_on else None,
        "feature_hash_bytes": total(HASH_OPS, "hash"),
        "feature_hash_copy_bytes": total(("hash_concat", "hash_flatten"), "hash"),
        "feature_hashes": count("sha256", "hash") + count("gpu_hash", "hash"),
        "digest_bytes": total(("sha256",), "producer"),
    }


def hash_and_cache_notes(
    per_arm: dict[str, dict[str, Any]], scope: str = "one repeat"
) -> list[str]:
    """Per arm, one repeat: the cache's hits and misses and the feature hash's bytes."""
    out = []
    for arm_, c in per_arm.items():
        cache = (
            f"preprocess cache {c['cache_hits']} hits, {c['cache_misses']} misses "
            f"({c['cache_reused_bytes']:,} bytes reused); "
            if c["cache_hits"] is not None
            else ""
        )
        out.append(
            f"{arm_}: {cache}feature hash {c['feature_hashes']} pass(es) over "
            f"{c['feature_hash_bytes']:,} bytes, {c['feature_hash_copy_bytes']:,} bytes "
            f"copied for it ({scope})."
        )
    return out
