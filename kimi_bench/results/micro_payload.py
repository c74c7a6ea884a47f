"""micro's payload costs, from an arm's repeats and its control rounds (``bench.
micro_control`` writes ``data.control``): an arm's payload cost is its time minus its own
control's, per stage and in total, with an interval that resamples both sides (they are
unpaired: ``stats.difference``); a payload speedup is the ratio of two arms' payload costs,
its interval drawing the same repeats for both arms and each arm's control rounds
independently (``stats.ratio_of_differences``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kimi_bench.infra.stats import IntervalDoc, Measurement
from kimi_bench.infra.stats.difference import difference, ratio_of_differences

Rec = Mapping[str, Any]


def series(recs: Sequence[Rec], stages: Sequence[str] | None, label: str) -> Measurement:
    """Per repeat: the total, or the sum of ``stages``."""
    vals = [
        r["total_ms"] if stages is None else sum(r["stage_ms"][s] for s in stages) for r in recs
    ]
    return Measurement(vals, "ms", label, [r["iteration"] for r in recs])


@dataclass(frozen=True)
class PayloadCost:
    """An arm's median, its control's, and the payload cost (their difference) with its
    interval."""

    arm_ms: float
    control_ms: float
    payload_ms: float
    interval: IntervalDoc


def payload_cost(arm: Measurement, ctl: Measurement) -> PayloadCost:
    d = difference(arm, ctl)
    return PayloadCost(arm.median, ctl.median, d.value, d.interval.as_dict())


def payload_costs(
    recs: Sequence[Rec], ctl: Sequence[Rec], stages: Sequence[str], kept: Sequence[str]
) -> list[PayloadCost]:
    """One arm's payload cost per stage of ``stages``, then in total, then in total over
    the ``kept`` stages only."""
    # the arm's and its control's series first (per stage, total, total over the kept
    # stages), then each difference
    pairs = {s: (series(recs, [s], s), series(ctl, [s], s)) for s in stages}
    total = (series(recs, None, "total"), series(ctl, None, "control total"))
    without = (series(recs, kept, "total"), series(ctl, kept, "control"))
    return [payload_cost(a, c) for a, c in [*pairs.values(), total, without]]


@dataclass(frozen=True)
class PayloadRatio:
    """``<arm>_vs_<base>`` on payload cost: the base's over the arm's (NaN: a payload cost
    not above its control), each payload cost (median minus control median) and the
    interval."""

    value: float
    base_payload_ms: float
    arm_payload_ms: float
    interval: IntervalDoc


def payload_ratio(
    base: Sequence[Rec], base_ctl: Sequence[Rec], arm: Sequence[Rec], arm_ctl: Sequence[Rec],
    names: tuple[str, str],
) -> PayloadRatio:  # fmt: skip
    """``names``: (arm, base), the series' labels."""
    series_of = {
        n: (series(recs, None, n), series(ctl, None, f"{n} control"))
        for n, recs, ctl in ((names[0], arm, arm_ctl), (names[1], base, base_ctl))
    }
    a, b = series_of[names[0]], series_of[names[1]]
    value, iv = ratio_of_differences(*b, *a)
    return PayloadRatio(value, b[0].median - b[1].median, a[0].median - a[1].median, iv.as_dict())
