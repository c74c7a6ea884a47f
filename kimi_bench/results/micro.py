"""micro's results: each arm's repeats and control rounds (``MicroRaw``) and the figures
derived from them (``MicroDerived``), once, by ``derive_micro``; ``micro_figures`` names
the figures the summary states (``FIGURES``).

A speedup ``<arm>_vs_<base>`` is the base's total over the arm's, paired per repeat (the
arms of one repeat run back to back), with the re-run interval of its median
(``stats.launches.speedup_interval``). An arm's payload cost is its median total minus the
median of its own control rounds (the pipeline with no pixels to speak of).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict

from kimi_bench.domain.stages import STAGES
from kimi_bench.infra.stats import Interval, Measurement
from kimi_bench.infra.stats.compare import ratio
from kimi_bench.infra.stats.launches import Spread, speedup_interval
from kimi_bench.results.base import typed_records


class MicroRepeat(BaseModel):
    """One repeat (or control round) of one arm: the fields its figures are derived from
    (the rest of the record is kept in the report as is)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    iteration: Hashable = None
    launch: int = 0
    stage_ms: dict[str, float]
    stage_bytes: dict[str, int | float] = {}
    total_ms: float
    bit_exact: bool | None = None


class LedgerCopy(BaseModel):
    """A row of an arm's copy ledger (one repeat): its bytes, and whether it copies them
    (views and maps do not)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    bytes: int | float
    copies: bool = True


@dataclass(frozen=True)
class MicroRaw:
    """What micro keeps: per arm its repeats (``repeats``, every launch's in order), its
    control rounds (``control``), its copy ledger (one repeat), and the data floor."""

    arms: tuple[str, ...]  # the arms asked for, in order
    baseline: str | None
    change: str | None
    repeats: dict[str, list[MicroRepeat]]
    control: dict[str, list[MicroRepeat]] = field(default_factory=dict)
    ledger: dict[str, list[LedgerCopy]] = field(default_factory=dict)
    floor_ms: float | None = None


def micro_repeats(records: Any, where: str) -> list[MicroRepeat]:
    """A JSON list of repeat records as typed repeats (ResultError names the field)."""
    return typed_records(records, MicroRepeat, where)


def ledger_rows(records: Any, where: str) -> list[LedgerCopy]:
    return typed_records(records, LedgerCopy, where)


def _ids(recs: Sequence[MicroRepeat]) -> list[Hashable]:
    return [i if r.iteration is None else r.iteration for i, r in enumerate(recs)]


def totals(recs: Sequence[MicroRepeat], label: str = "") -> Measurement:
    """Each repeat's total (ms), unit ids the repeats' iterations."""
    return Measurement([r.total_ms for r in recs], "ms", label, _ids(recs))


@dataclass(frozen=True)
class Speedup:
    """``<arm>_vs_<base>``: the paired per-repeat ratio (``launches``: each ratio's launch)
    with the re-run interval of its median and where its spread comes from (derived when
    first read: a bootstrap)."""

    ratio: Measurement
    launches: tuple[int, ...]

    @cached_property
    def _interval(self) -> tuple[Interval, Spread]:
        return speedup_interval(self.ratio.samples, self.launches)

    @property
    def interval(self) -> Interval:
        return self._interval[0]

    @property
    def spread(self) -> Spread:
        return self._interval[1]


def paired_speedup(raw: MicroRaw, key: str) -> Speedup:
    """``<arm>_vs_<base>``: the base's total over the arm's, per repeat (paired by
    iteration), each ratio with the arm's launch."""
    arm, _, base = key.partition("_vs_")
    recs = raw.repeats[arm]
    launch = dict(zip(_ids(recs), (r.launch for r in recs), strict=True))
    m = ratio(totals(raw.repeats[base], f"{base} total"), totals(recs, f"{arm} total"))
    return Speedup(m, tuple(launch[u] for u in m.unit_ids or ()))


@dataclass(frozen=True)
class ArmFigures:
    """One arm's figures: its totals and stages per repeat, its moved bytes (ledger rows
    that copy) and its control rounds' totals (None: no control round)."""

    total: Measurement
    stages: dict[str, Measurement]
    stage_bytes: dict[str, int | float]  # per stage, one repeat (the first)
    moved_bytes: float | None
    control: Measurement | None

    @property
    def median_ms(self) -> float | None:
        return self.total.median if self.total.n else None

    @property
    def control_ms(self) -> float | None:
        return self.control.median if self.control is not None and self.control.n else None

    @property
    def payload_ms(self) -> float | None:
        ctl = self.control_ms
        return None if ctl is None or not self.total.n else self.total.median - ctl


@dataclass(frozen=True)
class MicroDerived:
    """The figures of a micro report, from its raw records (``derive_micro``)."""

    arms: dict[str, ArmFigures]
    baseline: str
    change: str
    speedups: dict[str, Speedup]  # <arm>_vs_<base>
    exact: tuple[bool, ...]  # every non-baseline repeat's owner BF16 outputs equal
    floor_ms: float | None
    launches: tuple[int, ...]  # the change arm's repeats' launches

    @property
    def headline(self) -> Speedup | None:
        """The change against the baseline, when both ran."""
        return self.speedups.get(f"{self.change}_vs_{self.baseline}")

    @property
    def repeats_completed(self) -> int:
        return min((a.total.n for a in self.arms.values()), default=0)

    @property
    def bit_exact_all_repeats(self) -> bool | None:
        return all(self.exact) if self.exact else None  # None: one arm only

    def moved(self, arm: str) -> float | None:
        a = self.arms.get(arm)
        return None if a is None else a.moved_bytes

    @property
    def bytes_ratio(self) -> float | None:
        base, change = self.moved(self.baseline), self.moved(self.change)
        return base / change if base and change else None

    @property
    def change_median_ms(self) -> float | None:
        a = self.arms.get(self.change)
        return None if a is None else a.median_ms

    @property
    def over_floor(self) -> float | None:
        med = self.change_median_ms
        return med / self.floor_ms if self.floor_ms and med else None

    def payload_speedup(self, key: str) -> float | None:
        """``<arm>_vs_<base>`` on payload cost: the base's over the arm's (None: a payload
        cost not above its control)."""
        arm, _, base = key.partition("_vs_")
        pa, pb = self.arms[arm].payload_ms, self.arms[base].payload_ms
        return pb / pa if pa is not None and pb is not None and pa > 0 and pb > 0 else None

    @property
    def floor_with_control_ms(self) -> float | None:
        """The control + data floor: the cheapest arm's control plane plus the data floor."""
        ctl = [a.control_ms for a in self.arms.values() if a.control_ms is not None]
        return min(ctl) + self.floor_ms if ctl and self.floor_ms else None

    @property
    def has_control(self) -> bool:
        return any(a.control_ms is not None for a in self.arms.values())

    def has_payload(self, key: str) -> bool:
        return all(self.arms[a].control_ms is not None for a in key.split("_vs_"))


def arm_figures(
    recs: Sequence[MicroRepeat],
    arm: str,
    control: Sequence[MicroRepeat] | None = None,
    ledger: Sequence[LedgerCopy] | None = None,
) -> ArmFigures:
    """One arm's figures from its repeats (or control rounds), its control rounds and its
    copy ledger."""
    ids = _ids(recs)
    stages = [s for s in STAGES if recs and s in recs[0].stage_ms]
    return ArmFigures(
        total=totals(recs, f"{arm} total"),
        stages={s: Measurement([r.stage_ms[s] for r in recs], "ms", s, ids) for s in stages},
        stage_bytes={s: recs[0].stage_bytes.get(s, 0) for s in stages},
        moved_bytes=None if ledger is None else sum(r.bytes for r in ledger if r.copies),
        control=totals(control, f"{arm} control") if control and recs else None,
    )


def _pairs(names: Sequence[str], baseline: str | None, change: str | None) -> list[str]:
    """Every arm against the baseline and, for the arms other than the change, against the
    change too, in arm order."""
    out = []
    for arm in names:
        for base in (baseline, change):
            if base is None or arm == base or base not in names:
                continue
            if (base, arm) == (change, baseline):
                continue
            out.append(f"{arm}_vs_{base}")
    return out


def derive_micro(raw: MicroRaw) -> MicroDerived:
    """Every figure of a micro report from its raw records."""
    arms = {
        arm: arm_figures(recs, arm, raw.control.get(arm), raw.ledger.get(arm))
        for arm, recs in raw.repeats.items()
    }
    speedups = {}
    for key in _pairs(list(raw.repeats), raw.baseline, raw.change):
        arm, _, base = key.partition("_vs_")
        if raw.repeats[arm] and raw.repeats[base]:
            speedups[key] = paired_speedup(raw, key)
    change = raw.repeats.get(raw.change or "") or []
    return MicroDerived(
        arms=arms,
        baseline=raw.baseline or "",
        change=raw.change or "",
        speedups=speedups,
        exact=tuple(
            r.bit_exact is True
            for a, recs in raw.repeats.items()
            if a != raw.baseline
            for r in recs
        ),
        floor_ms=raw.floor_ms,
        launches=tuple(r.launch for r in change),
    )
