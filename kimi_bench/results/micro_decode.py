"""micro's figures of the arm whose inputs travel encoded (``deferred-decode``), from its
repeats and another arm's (``bench.micro_decode`` writes the block): what it saves against
that arm, paired per repeat (base minus arm: positive = the arm is cheaper), the speedup
of its totals, and its owners' decode time (the slowest rank's, per repeat)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from kimi_bench.infra.stats import Measurement, MedianDoc
from kimi_bench.infra.stats.compare import ratio

Rec = Mapping[str, Any]


def _paired_delta(
    base: Sequence[Rec], arm: Sequence[Rec], key: Callable[[Rec], float]
) -> Measurement:
    """base minus arm per repeat (same iteration), of ``key(record)``."""
    by_it: dict[Hashable, float] = {r["iteration"]: key(r) for r in arm}
    pairs = [(r["iteration"], key(r) - by_it[r["iteration"]]) for r in base
             if r["iteration"] in by_it]  # fmt: skip
    return Measurement([d for _, d in pairs], "ms", unit_ids=[i for i, _ in pairs])


def _stage(name: str) -> Callable[[Rec], float]:
    return lambda r: r["stage_ms"][name]


def decode_savings(
    base: Sequence[Rec], arm: Sequence[Rec], base_total: Measurement, arm_total: Measurement
) -> dict[str, MedianDoc]:
    """Against one base arm: total and producer time saved, owner_h2d time added (paired
    per repeat) and the speedup of the totals, each as a median with its interval."""
    # the paired series first, then the speedup, then every summary
    deltas = (_paired_delta(base, arm, lambda r: r["total_ms"]),
              _paired_delta(base, arm, _stage("producer")),
              _paired_delta(arm, base, _stage("owner_h2d")))  # fmt: skip
    speed = ratio(base_total, arm_total)
    saved, producer, owner_added = (d.median_doc() for d in deltas)
    return {
        "saved_ms": saved,
        "speedup": speed.median_doc(),
        "producer_saved_ms": producer,
        "owner_added_ms": owner_added,
    }


def owner_decode(arm: Sequence[Rec]) -> MedianDoc:
    """The owners' decode time per repeat (the slowest rank's), as a median."""
    return Measurement([r.get("owner_decode_ms", 0.0) for r in arm], "ms").median_doc()
