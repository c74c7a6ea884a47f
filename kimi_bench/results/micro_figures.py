"""micro's stated figures, each declared once (``FIGURES``): its summary name, how it is
derived from ``MicroDerived`` (``results.micro``) and its label. The writer fills the
summary from this table (``stated_figures``), the read check holds a stated summary against
it, the gate's ``[micro.min]``/``[micro.max]`` limits address its names (``figure_named``)
and the stages table's TOTAL rows show its ``column`` figures: a figure added here is
written, checked, gateable and shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kimi_bench.results.micro import MicroDerived

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
    Figure(
        "{arm}_median_ms",
        "median total (ms)",
        _arm_stat("median"),
        "arm",
        column="median_ms",
        at="total_ms/median",
    ),
    Figure(
        "{arm}_p10_ms",
        "p10 total (ms)",
        _arm_stat("p10"),
        "arm",
        stated=False,
        column="p10_ms",
        at="total_ms/p10",
    ),
    Figure(
        "{arm}_p90_ms",
        "p90 total (ms)",
        _arm_stat("p90"),
        "arm",
        stated=False,
        column="p90_ms",
        at="total_ms/p90",
    ),
    Figure("speedup_median", "change vs baseline, median (x)", _head("median")),
    Figure("speedup_p10", "change vs baseline, p10 (x)", _head("p10")),
    Figure("speedup_p90", "change vs baseline, p90 (x)", _head("p90")),
    Figure(
        "speedup_{pair}",
        "paired speedup, median (x)",
        lambda d, k: d.speedups[k].ratio.median,
        "pair",
    ),
    Figure(
        "bit_exact_all_repeats",
        "owner BF16 outputs equal in every repeat",
        lambda d, _: d.bit_exact_all_repeats,
    ),
    Figure(
        "{arm}_moved_bytes",
        "bytes copied (one repeat)",
        lambda d, a: d.moved(a),
        "arm",
        column="bytes",
        at="moved_bytes",
    ),
    Figure("bytes_ratio", "baseline bytes over the change's", lambda d, _: d.bytes_ratio),
    Figure("floor_ms", "data floor (ms)", lambda d, _: d.floor_ms),
    Figure("deferred_over_floor", "change median over the floor", lambda d, _: d.over_floor),
    Figure(
        "{arm}_control_ms",
        "control rounds' median (ms)",
        lambda d, a: d.arms[a].control_ms,
        "arm",
        when=_has_control,
    ),
    Figure(
        "{arm}_payload_ms",
        "payload cost: median minus control (ms)",
        lambda d, a: d.arms[a].payload_ms,
        "arm",
        when=_has_control,
    ),
    Figure(
        "payload_speedup_{pair}",
        "payload-cost ratio (x)",
        lambda d, k: d.payload_speedup(k),
        "pair",
        when=lambda d, k: d.has_payload(k),
    ),
    Figure(
        "floor_with_control_ms",
        "control + data floor (ms)",
        lambda d, _: d.floor_with_control_ms,
        when=lambda d, _: d.has_control,
    ),
    Figure(
        "deferred_payload_over_data_floor",
        "change payload cost over the data floor",
        lambda d, _: (d.arms[d.change].payload_ms or 0.0) / (d.floor_ms or 1),
        when=lambda d, _: bool(d.floor_ms) and _has_control(d, d.change),
    ),
    Figure(
        "deferred_over_floor_with_control",
        "change median over the control + data floor",
        lambda d, _: (d.change_median_ms or 0) / (d.floor_with_control_ms or 1),
        when=lambda d, _: bool(d.floor_with_control_ms and d.change_median_ms),
    ),
)


def figure_named(name: str, arms: Sequence[str]) -> Figure | None:
    """The figure a summary name (``deferred_median_ms``) belongs to, given the arms that
    may run (None: no such figure)."""
    pairs = [f"{a}_vs_{b}" for a in arms for b in arms if a != b]
    keys: dict[str, list[str]] = {"run": [""], "arm": list(arms), "pair": pairs}
    return next((f for f in FIGURES if any(f.named(k) == name for k in keys[f.over])), None)


def stated_figures(d: MicroDerived) -> dict[str, Any]:
    """The figures the summary states, by name."""
    return {name: value for f in FIGURES if f.stated for name, value in f.values(d)}


def all_figures(d: MicroDerived) -> dict[str, Any]:
    """Every figure of ``FIGURES`` the run gives, by name, in table order."""
    return {name: value for f in FIGURES for name, value in f.values(d)}
