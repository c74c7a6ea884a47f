"""A workload's summary for the report (``data.workload``): where it came from, requests,
images and distinct images, repeats, images per request, formats, generated contents, size
buckets, encoded bytes and pixel sizes. ``size_bucket`` (``domain.size_buckets``) is the one
bucketing every serve-ab table uses."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from kimi_bench.domain.size_buckets import BUCKET_ORDER, size_bucket
from kimi_bench.serving.workload.model import Workload


def _spread(values: list[int]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    return {"min": float(arr.min()), "median": float(np.median(arr)), "max": float(arr.max())}


def summarize(w: Workload) -> dict[str, Any]:
    slots = [k for r in w.requests for k in r.keys]
    seen: set[int] = set()
    repeats = 0
    for k in slots:
        repeats += k in seen
        seen.add(k)
    imgs = [w.pool[k] for k in slots] or list(w.pool)
    buckets = Counter(size_bucket(p.width, p.height) for p in imgs)
    per_request = Counter(len(r.keys) for r in w.requests)
    contents = Counter(p.content for p in imgs if p.content is not None)
    return {
        "source": dict(w.source),
        "requests": len(w.requests),
        "images": len(slots),
        "distinct_images": len(seen),
        "repeated_images": repeats,
        "repeat_share": repeats / len(slots) if slots else 0.0,
        "images_per_request": {str(n): per_request[n] for n in sorted(per_request)},
        "formats": dict(sorted(Counter(p.format for p in imgs).items())),
        "contents": dict(sorted(contents.items())),  # generated images' (none for files)
        "size_buckets": {b: buckets[b] for b in BUCKET_ORDER if buckets[b]},
        "encoded_bytes": sum(len(p.data) for p in imgs),
        "distinct_encoded_bytes": sum(len(w.pool[k].data) for k in seen),
        "width": _spread([p.width for p in imgs]),
        "height": _spread([p.height for p in imgs]),
        "pixels": _spread([p.width * p.height for p in imgs]),
        "prompts": len({r.prompt for r in w.requests}),
        "timestamps": w.timestamps is not None,
    }
