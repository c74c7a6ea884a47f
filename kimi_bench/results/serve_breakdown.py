"""serve-ab's traffic breakdowns (issue 43), from the request rows: per rate and arm, by
image-size bucket (each image in the bucket of its longest side: images, deferral
decisions, raw, FP32 and encoded bytes; TTFT of the requests whose largest image is in
it) and by images per request (requests, TTFT, deferred images, and the *mixed* requests
where some images were deferred and others not: a per-image profile, sglang-0.5.23, makes
them; a per-request profile, pr-33921, never does). The decisions are the emulator's
(``image_decisions`` of each request); a real server reports none and its rows say so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kimi_bench.domain.size_buckets import BUCKET_ORDER, size_bucket

Row = Mapping[str, Any]


def _median(xs: list[float]) -> float | None:
    return float(np.median(xs)) if xs else None


def _p90(xs: list[float]) -> float | None:
    return float(np.percentile(xs, 90)) if xs else None


def _images(row: Row) -> list[tuple[int, int, int, list[int] | None]]:
    """(width, height, encoded bytes, decision or None) of each image of a request."""
    sizes = row.get("image_sizes") or []
    decisions = row.get("image_decisions")
    ok = isinstance(decisions, list) and len(decisions) == len(sizes)
    return [(int(w), int(h), int(b), decisions[k] if ok else None)  # type: ignore[index]
            for k, (w, h, b) in enumerate(sizes)]  # fmt: skip


def _served(row: Row) -> bool:
    return row.get("error") is None and row.get("ttft_ms") is not None


def _empty() -> dict[str, Any]:
    return {"images": 0, "decided": 0, "deferred": 0, "raw_bytes": 0, "fp32_bytes": 0,
            "encoded_bytes": 0, "ttft": []}  # fmt: skip


def _add(acc: dict[str, Any], w: int, h: int, size: int, decision: list[int] | None) -> None:
    acc["images"] += 1
    acc["encoded_bytes"] += size
    if decision is not None and len(decision) >= 3:
        acc["decided"] += 1
        acc["deferred"] += int(decision[0])
        acc["raw_bytes"] += int(decision[1])
        acc["fp32_bytes"] += int(decision[2])


def _finish(key: dict[str, Any], acc: dict[str, Any]) -> dict[str, Any]:
    ttft = acc.pop("ttft")
    decided = acc.pop("decided")
    out = {**key, **acc, "requests": len(ttft), "ttft_median_ms": _median(ttft),
           "ttft_p90_ms": _p90(ttft)}  # fmt: skip
    out["deferred"] = acc["deferred"] if decided else None  # no decisions reported
    return out


def by_size(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per (rate, arm, size bucket) of the served requests."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in (r for r in rows if _served(r)):
        imgs = _images(row)
        if not imgs:
            continue
        rate, arm = str(row["rate"]), str(row["arm"])
        for w, h, size, decision in imgs:
            _add(groups.setdefault((rate, arm, size_bucket(w, h)), _empty()), w, h, size, decision)
        w, h, *_ = max(imgs, key=lambda i: max(i[0], i[1]))
        groups[(rate, arm, size_bucket(w, h))]["ttft"].append(float(row["ttft_ms"]))
    order = {b: i for i, b in enumerate(BUCKET_ORDER)}
    keys = sorted(groups, key=lambda k: (k[0], k[1], order[k[2]]))
    return [_finish({"rate": k[0], "arm": k[1], "size_bucket": k[2]}, groups[k]) for k in keys]


def by_count(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per (rate, arm, images per request) of the served requests, with the mixed ones."""
    groups: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in (r for r in rows if _served(r)):
        imgs = _images(row)
        acc = groups.setdefault((str(row["rate"]), str(row["arm"]), len(imgs)),
                                _empty() | {"mixed_requests": 0})  # fmt: skip
        for w, h, size, decision in imgs:
            _add(acc, w, h, size, decision)
        acc["ttft"].append(float(row["ttft_ms"]))
        flags = {d[0] for *_, d in imgs if d is not None}
        acc["mixed_requests"] += int(len(flags) > 1)
    keys = sorted(groups)
    return [
        _finish({"rate": k[0], "arm": k[1], "images_per_request": k[2]}, groups[k]) for k in keys
    ]


def stopped_early(rows: Sequence[Row]) -> dict[tuple[str, str], int]:
    """(rate, arm) -> served requests whose usage reports fewer completion tokens than the
    max tokens they asked for (a model that stopped at its end-of-sequence token)."""
    out: dict[tuple[str, str], int] = {}
    for row in (r for r in rows if _served(r)):
        key = (str(row["rate"]), str(row["arm"]))
        n, limit = row.get("output_tokens"), row.get("max_tokens")
        out[key] = out.get(key, 0) + int(n is not None and limit is not None and n < limit)
    return out


def keep_up(pairs: Sequence[tuple[float, float]]) -> float | None:
    """How well an arm kept up with its arrivals: the span of the arrivals over the span of
    the first tokens, (scheduled, first token) seconds of each served request. About 1 when
    first tokens come out as fast as requests come in (whatever the latency: both spans
    shift by it); well below 1 when requests queue (saturation). None with fewer than three
    requests or all arriving at once (rate inf)."""
    if len(pairs) < 3:
        return None
    arrivals = sorted(a for a, _ in pairs)
    firsts = sorted(f for _, f in pairs)
    span_in, span_out = arrivals[-1] - arrivals[0], firsts[-1] - firsts[0]
    if span_in <= 0 or span_out <= 0:
        return None
    return span_in / span_out


def keep_up_of_rows(rows: Sequence[Row]) -> dict[tuple[str, str], float | None]:
    """(rate, arm) -> ``keep_up`` of its first repeat's served requests (HTTP rows)."""
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in rows:
        s, f = r.get("scheduled_s"), r.get("first_token_s")
        if _served(r) and r.get("repeat", 0) == 0 and s is not None and f is not None:
            groups.setdefault((str(r["rate"]), str(r["arm"])), []).append((float(s), float(f)))
    return {key: keep_up(pairs) for key, pairs in groups.items()}
