"""The producer's preprocess-cache steps (``pipeline.preprocess_cache`` holds the cache):
every input's content digest, the hits before any decode, and each miss's item stored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.policy import Decision
from kimi_bench.pipeline.preprocess_cache import content_digest
from kimi_bench.pipeline.step import Step

DIGEST = "snapshot_media: SHA-256 of the content (the cache key / item identity)"


def look_up(
    step: Step, images: Sequence[Any], decisions: Sequence[Decision]
) -> tuple[list[bytes | None], dict[int, MMItem], dict[int, int]]:
    """Every input's content digest (a runtime with an identity per image computes it,
    cache on or off: ``snapshot_media``) and, with the cache on, the hits by index (each
    hit's item reused: ``cache_hit``, no byte copied) and the repeats of a miss earlier in
    the same request (index -> that miss: "duplicate misses share the same preprocessing
    work", ``prepare_media_artifacts``)."""
    keys: list[bytes | None] = [None] * len(images)
    hits: dict[int, MMItem] = {}
    repeats: dict[int, int] = {}
    if not step.profile.has_preprocess_cache or step.arm.proposed:
        return keys, hits, repeats
    missed: dict[bytes, int] = {}
    for i, (obj, d) in enumerate(zip(images, decisions, strict=True)):
        got = None if d.encoded else content_digest(obj)
        if got is None:
            continue
        key, nbytes = got
        keys[i] = key
        step.ledger.add("producer", "sha256", "host", "host", nbytes, DIGEST)
        if step.cache is None:
            continue
        if key in missed:  # its ledger row once the shared item is made (``reuse``)
            repeats[i] = missed[key]
            step.cache.hits += 1
            continue
        art = step.cache.get(key)
        if art is None:
            missed[key] = i
            continue
        mirrors = "MultimodalPreprocessCache.get: the stored CPU feature"
        step.ledger.add("producer", "cache_hit", "host", "host", art.nbytes, mirrors)
        hits[i] = art.item
    return keys, hits, repeats


def reuse(step: Step, item: MMItem, repeat: bool) -> MMItem:
    """A hit's (or a request's repeat's) item: the same feature, its own fields; a repeat
    of a miss earlier in the request is listed here, with the bytes it shares."""
    if repeat:
        nbytes = tensor_bytes(item.feature) if isinstance(item.feature, torch.Tensor) else 0
        mirrors = "prepare_media_artifacts: a duplicate miss shares the work"
        step.ledger.add("producer", "cache_hit", "host", "host", nbytes, mirrors)
    return MMItem(item.feature, dict(item.model_specific_data))


def store(step: Step, key: bytes | None, item: MMItem) -> None:
    """A miss's item into the cache (a runtime arm, cache on, keyed input)."""
    if step.cache is None or key is None or not isinstance(item.feature, torch.Tensor):
        return
    if step.cache.put(key, item):
        mirrors = "MultimodalPreprocessCache.put: the CPU feature"
        step.ledger.add(
            "producer", "cache_store", "host", "host", tensor_bytes(item.feature), mirrors
        )
