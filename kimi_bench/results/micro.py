"""micro's results: each arm's repeats and control rounds (``MicroRaw``), the figures its
summary states from them (``MicroDerived``), derived once by ``derive_micro``, and the
table of those figures by name (``FIGURES``): the writer fills the summary from it, the
read check holds a stated summary against it, the gate's ``[micro.min]``/``[micro.max]``
limits address its names, and the stages table shows its ``column`` figures.

A speedup ``<arm>_vs_<base>`` is the base's total over the arm's, paired per repeat (the
arms of one repeat run back to back), with the re-run interval of its median
(``stats.launches.speedup_interval``). An arm's payload cost is its median total minus the
median of its own control rounds (the pipeline with no pixels to speak of).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

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

    @cached_property
    def figures(self) -> dict[str, Any]:
        """Every stated figure by its summary name (``FIGURES``), in table order."""
        return {name: value for f in FIGURES for name, value in f.values(self)}


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


# ----------------------------------------------------------------------- the figures


Over = Literal["run", "arm", "pair"]


@dataclass(frozen=True)
class Figure:
    """One stated figure: its summary name (``{arm}``/``{pair}``: per arm, per comparison,
    dashes written as underscores), how it is derived, its label. ``stated``: written in
    the summary (else only shown); ``column``: the stages table's column its arm's TOTAL
    row shows it in, ``at`` where the report's arm block states it; ``when``: whether the
    figure exists for this arm or comparison (else it is left out of the summary)."""

    name: str
    label: str
    value: Callable[[MicroDerived, str], Any]
    over: Over = "run"
    stated: bool = True
    column: str | None = None
    at: str | None = None
    when: Callable[[MicroDerived, str], bool] = lambda d, k: True

    def keys(self, d: MicroDerived) -> list[str]:
        return {"run": [""], "arm": list(d.arms), "pair": list(d.speedups)}[self.over]

    def named(self, key: str) -> str:
        k = key.replace("-", "_")
        return self.name.format(arm=k, pair=k)

    def values(self, d: MicroDerived) -> list[tuple[str, Any]]:
        return [(self.named(k), self.value(d, k)) for k in self.keys(d) if self.when(d, k)]


def _arm_stat(stat: str) -> Callable[[MicroDerived, str], float | None]:
    return lambda d, a: getattr(d.arms[a].total, stat) if d.arms[a].total.n else None


def _head(stat: str) -> Callable[[MicroDerived, str], float | None]:
    return lambda d, _: getattr(d.headline.ratio, stat) if d.headline else None


def _has_control(d: MicroDerived, arm: str) -> bool:
    return arm in d.arms and d.arms[arm].control_ms is not None


FIGURES: tuple[Figure, ...] = (
    Figure("repeats_completed", "repeats every arm completed", lambda d, _: d.repeats_completed),
    Figure("{arm}_median_ms", "median total (ms)", _arm_stat("median"), "arm",
           column="median_ms", at="total_ms/median"),
    Figure("{arm}_p10_ms", "p10 total (ms)", _arm_stat("p10"), "arm", stated=False,
           column="p10_ms", at="total_ms/p10"),
    Figure("{arm}_p90_ms", "p90 total (ms)", _arm_stat("p90"), "arm", stated=False,
           column="p90_ms", at="total_ms/p90"),
    Figure("speedup_median", "change vs baseline, median (x)", _head("median")),
    Figure("speedup_p10", "change vs baseline, p10 (x)", _head("p10")),
    Figure("speedup_p90", "change vs baseline, p90 (x)", _head("p90")),
    Figure("speedup_{pair}", "paired speedup, median (x)",
           lambda d, k: d.speedups[k].ratio.median, "pair"),
    Figure("bit_exact_all_repeats", "owner BF16 outputs equal in every repeat",
           lambda d, _: d.bit_exact_all_repeats),
    Figure("{arm}_moved_bytes", "bytes copied (one repeat)", lambda d, a: d.moved(a), "arm",
           column="bytes", at="moved_bytes"),
    Figure("bytes_ratio", "baseline bytes over the change's", lambda d, _: d.bytes_ratio),
    Figure("floor_ms", "data floor (ms)", lambda d, _: d.floor_ms),
    Figure("deferred_over_floor", "change median over the floor", lambda d, _: d.over_floor),
    Figure("{arm}_control_ms", "control rounds' median (ms)",
           lambda d, a: d.arms[a].control_ms, "arm", when=_has_control),
    Figure("{arm}_payload_ms", "payload cost: median minus control (ms)",
           lambda d, a: d.arms[a].payload_ms, "arm", when=_has_control),
    Figure("payload_speedup_{pair}", "payload-cost ratio (x)",
           lambda d, k: d.payload_speedup(k), "pair", when=lambda d, k: d.has_payload(k)),
    Figure("floor_with_control_ms", "control + data floor (ms)",
           lambda d, _: d.floor_with_control_ms, when=lambda d, _: d.has_control),
    Figure("deferred_payload_over_data_floor", "change payload cost over the data floor",
           lambda d, _: (d.arms[d.change].payload_ms or 0.0) / (d.floor_ms or 1),
           when=lambda d, _: bool(d.floor_ms) and _has_control(d, d.change)),
    Figure("deferred_over_floor_with_control", "change median over the control + data floor",
           lambda d, _: (d.change_median_ms or 0) / (d.floor_with_control_ms or 1),
           when=lambda d, _: bool(d.floor_with_control_ms and d.change_median_ms)),
)  # fmt: skip


def figure_named(name: str, arms: Sequence[str]) -> Figure | None:
    """The figure a summary name (``deferred_median_ms``) belongs to, given the arms that
    may run (None: no such figure)."""
    pairs = [f"{a}_vs_{b}" for a in arms for b in arms if a != b]
    keys: dict[str, list[str]] = {"run": [""], "arm": list(arms), "pair": pairs}
    return next((f for f in FIGURES if any(f.named(k) == name for k in keys[f.over])), None)


def stated_figures(d: MicroDerived) -> dict[str, Any]:
    """The figures the summary states, by name."""
    stated = {f.named(k) for f in FIGURES if f.stated for k in f.keys(d)}
    return {k: v for k, v in d.figures.items() if k in stated}
