"""sglang 0.5.23's preprocess cache (SPEC section 12), one per producer: a bounded,
content-addressed LRU of each image's preprocessed CPU feature
(``MultimodalPreprocessCache``: the service-wide budget split across tokenizer workers, at
most 8192 entries, an entry larger than the budget not kept, least recently used first
out). The key is the content digest of what the client sent (the encoded bytes' SHA-256;
an image given decoded: its pixels'), which the producer computes for every image. A hit
skips the decode, the preprocessing, the feature hash and the producer copy; its stored
CPU feature still goes into a fresh shared-memory segment per request (the carrier).

Only the runtime's own arms use it (a proposed arm's producer has no such cache), and only
under a profile with the cache on; the PR era has none."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.policy import Decision


@dataclass(frozen=True)
class Artifact:
    """One image's cached preprocessing: its CPU feature and the item's other fields, its
    deferral decision and the image's size."""

    item: MMItem
    nbytes: int
    decision: Decision
    size: tuple[int, int]


@dataclass(frozen=True)
class CachedInput:
    """A request image found in the cache before any decode (serve's producers look it
    up as the request arrives): the producer step reuses its artifact."""

    artifact: Artifact

    @property
    def width(self) -> int:
        return self.artifact.size[0]

    @property
    def height(self) -> int:
        return self.artifact.size[1]


@dataclass
class PreprocessCache:
    """One producer's cache (``max_bytes``: its share of the budget)."""

    max_bytes: int
    max_entries: int
    entries: OrderedDict[bytes, Artifact] = field(default_factory=OrderedDict)
    size: int = 0
    hits: int = 0
    misses: int = 0

    def get(self, key: bytes) -> Artifact | None:
        got = self.entries.get(key)
        if got is None:
            self.misses += 1
            return None
        self.entries.move_to_end(key)
        self.hits += 1
        return got

    def put(self, key: bytes, item: MMItem, decision: Decision, size: tuple[int, int]) -> bool:
        """Keep ``item`` (its feature must be a host tensor); False when it is too big."""
        nbytes = tensor_bytes(item.feature)
        if nbytes > self.max_bytes:
            return False
        if key in self.entries:
            self.size -= self.entries.pop(key).nbytes
        while self.entries and (
            self.size + nbytes > self.max_bytes or len(self.entries) >= self.max_entries
        ):
            _, evicted = self.entries.popitem(last=False)
            self.size -= evicted.nbytes
        self.entries[key] = Artifact(item, nbytes, decision, size)
        self.size += nbytes
        return True

    def clear(self) -> None:
        """Empty, counts kept (a new round of the same requests starts cold)."""
        self.entries.clear()
        self.size = 0


def content_digest(obj: Any) -> tuple[bytes, int] | None:
    """The cache key of an input and the bytes hashed to make it: the encoded bytes'
    SHA-256, or a decoded image's pixels' (None: a tensor input, keyed by nothing)."""
    if isinstance(obj, EncodedImage):
        return hashlib.sha256(obj.data).digest(), len(obj.data)
    if isinstance(obj, (bytes, bytearray)):
        return hashlib.sha256(obj).digest(), len(obj)
    if isinstance(obj, Image.Image):
        # everything that decides the staged pixels: mode, size, palette, transparency (two
        # palette images with the same indices once shared a key and an RGBA staging)
        pixels = obj.tobytes()
        head = repr((obj.mode, obj.size, obj.getpalette(), obj.info.get("transparency")))
        return hashlib.sha256(head.encode() + pixels).digest(), len(pixels)
    if isinstance(obj, torch.Tensor):
        return None
    return None
