"""The producer's preprocess-cache steps (``pipeline.preprocess_cache`` holds the cache):
every input's content digest, the hits before any decode, and each miss's item stored."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch

from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.policy import Decision
from kimi_bench.pipeline.preprocess_cache import CachedInput, content_digest
from kimi_bench.pipeline.step import Step

DIGEST = "snapshot_media: SHA-256 of the content (the cache key / item identity)"


def load_inputs(
    step: Step, datas: Sequence[bytes], idents: Sequence[int | None] | None
) -> list[Any]:
    """A request's encoded images as the producer holds them before its step (serve): a
    runtime with an image identity digests each one first (``snapshot_media``), so that
    with the cache on a hit is not decoded (a ``CachedInput``) and a repeat of a miss in
    the same request is decoded once; the others are decoded (``arm.load``). ``idents``:
    the workload's image identities (serve-ab cycles a few payloads over many distinct
    images; the identity keeps them distinct), None: the bytes alone."""
    if not step.profile.has_preprocess_cache or step.arm.proposed:
        return [step.arm.load(step, d) for d in datas]
    out: list[Any] = []
    loaded: dict[bytes, Any] = {}
    for k, data in enumerate(datas):
        key = hashlib.sha256(data).digest()
        ident = None if idents is None else idents[k]
        key += b"" if ident is None else int(ident).to_bytes(8, "big")
        step.ledger.add("producer", "sha256", "host", "host", len(data), DIGEST)
        art = None
        if step.cache is not None and key not in loaded:
            art = step.cache.get(key)
        if art is not None:
            out.append(CachedInput(art))
            continue
        if key not in loaded:
            loaded[key] = step.arm.load(step, data)
            step.load_keys[id(loaded[key])] = key
        out.append(loaded[key])
    return out


def look_up(
    step: Step, images: Sequence[Any], decisions: Sequence[Decision]
) -> tuple[list[bytes | None], dict[int, MMItem], dict[int, int]]:
    """Every input's content digest (a runtime with an identity per image computes it,
    cache on or off: ``snapshot_media``; serve's were made on arrival, ``load_inputs``)
    and, with the cache on, the hits by index (each hit's item reused: ``cache_hit``, no
    byte copied) and the repeats of a miss earlier in the same request (index -> that
    miss: "duplicate misses share the same preprocessing work",
    ``prepare_media_artifacts``)."""
    keys: list[bytes | None] = [None] * len(images)
    hits: dict[int, MMItem] = {}
    repeats: dict[int, int] = {}
    if not step.profile.has_preprocess_cache or step.arm.proposed:
        return keys, hits, repeats
    missed: dict[bytes, int] = {}
    for i, (obj, d) in enumerate(zip(images, decisions, strict=True)):
        if isinstance(obj, CachedInput):
            mirrors = "MultimodalPreprocessCache.get: the stored CPU feature"
            step.ledger.add("producer", "cache_hit", "host", "host", obj.artifact.nbytes, mirrors)
            hits[i] = obj.artifact.item
            continue
        key = step.load_keys.get(id(obj))
        if key is None:
            got = None if d.encoded else content_digest(obj)
            if got is None:
                continue
            key = got[0]
            step.ledger.add("producer", "sha256", "host", "host", got[1], DIGEST)
        keys[i] = key
        if step.cache is None:
            continue
        if key in missed:  # its ledger row once the shared item is made (``reuse``)
            repeats[i] = missed[key]
            step.cache.hits += 1
            continue
        missed[key] = i
        if id(obj) in step.load_keys:
            continue  # counted as a miss on arrival (``load_inputs``)
        art = step.cache.get(key)
        if art is not None:
            del missed[key]
            mirrors = "MultimodalPreprocessCache.get: the stored CPU feature"
            step.ledger.add("producer", "cache_hit", "host", "host", art.nbytes, mirrors)
            hits[i] = art.item
    step.load_keys.clear()
    return keys, hits, repeats


def reuse(step: Step, item: MMItem, repeat: bool) -> MMItem:
    """A hit's (or a request's repeat's) item: the same feature, its own fields; a repeat
    of a miss earlier in the request is listed here, with the bytes it shares."""
    if repeat:
        nbytes = tensor_bytes(item.feature) if isinstance(item.feature, torch.Tensor) else 0
        mirrors = "prepare_media_artifacts: a duplicate miss shares the work"
        step.ledger.add("producer", "cache_hit", "host", "host", nbytes, mirrors)
    return MMItem(item.feature, dict(item.model_specific_data))


def store(step: Step, key: bytes | None, item: MMItem, decision: Decision, obj: Any) -> None:
    """A miss's item into the cache (a runtime arm, cache on, keyed input)."""
    if step.cache is None or key is None or not isinstance(item.feature, torch.Tensor):
        return
    if step.cache.put(key, item, decision, (int(obj.width), int(obj.height))):
        mirrors = "MultimodalPreprocessCache.put: the CPU feature"
        nbytes = tensor_bytes(item.feature)
        step.ledger.add("producer", "cache_store", "host", "host", nbytes, mirrors)


def cached_decisions(
    images: Sequence[Any],
) -> dict[int, Decision]:
    """The decisions the cache already holds (its hits), by index."""
    return {i: o.artifact.decision for i, o in enumerate(images) if isinstance(o, CachedInput)}
