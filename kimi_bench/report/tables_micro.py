"""The tables of a micro report (``report.tables``), and the report as they, its figures
and its verdict read it (``micro_of``: made once per report)."""

from __future__ import annotations

import marshal
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError

from kimi_bench.report.agree import Disagreement, micro_raw_of
from kimi_bench.report.envelope import Header, Loose, Number
from kimi_bench.report.kinds import Compared, MicroReport
from kimi_bench.report.table import Span, Table, pointer
from kimi_bench.report.tables_base import (
    CONTROL_COLUMNS,
    COPY_COLUMNS,
    NOISE_MIN_MS,
    Dict,
    col,
    rows_table,
)
from kimi_bench.results.base import ResultError
from kimi_bench.results.micro import MicroDerived, MicroRaw, derive_micro
from kimi_bench.results.micro_figures import FIGURES

# ------------------------------------------------------------------- the report, read once

Ratios = Loose[dict[str, Loose[Compared]]]


class TimelineSpan(BaseModel):
    stage: Any = None
    start_ms: Loose[Number] = None
    end_ms: Loose[Number] = None


class TimelineLane(BaseModel):
    """One rank's spans in a repeat (``timeline.<arm>.ranks``)."""

    lane: Any = None
    rank: Any = "?"
    spans: Loose[list[TimelineSpan]] = None


class ArmTimeline(BaseModel):
    ranks: Loose[list[TimelineLane]] = None


class StatedControl(BaseModel):
    """``control`` as shown as written: its rows, what its rounds carried and the
    payload-cost ratios."""

    rows: Loose[list[Any]] = None
    payload_images: Any = None
    payload_speedups: Ratios = None


class StatedSummary(BaseModel):
    decisions: Loose[list[Any]] = None  # the deferred arm's decision per image


class Stated(BaseModel):
    """What a micro report states beyond ``kinds.MicroReport`` that its tables and verdict
    show as written: the ratio blocks (``speedups``; older reports one ``speedup``), the
    control rows, the decisions and the per-rank timeline. A block of another type reads
    as absent."""

    speedups: Ratios = None
    speedup: Loose[Compared] = None
    control: Loose[StatedControl] = None
    summary: Loose[StatedSummary] = None
    timeline: Loose[dict[str, Loose[ArmTimeline]]] = None  # per arm: one repeat's spans


@dataclass(frozen=True, eq=False)
class Micro:
    """A micro report as its tables, figures and verdict read it: its model, its raw
    records and the figures derived from them, each made when first read."""

    report: Dict  # as ``Report.to_dict()`` writes it

    @cached_property
    def header(self) -> Header:
        """The title and caption's reading (drawable for a partial report too)."""
        return Header.model_validate(self.report)

    @cached_property
    def typed(self) -> MicroReport:
        return MicroReport.model_validate(self.report)

    @cached_property
    def stated(self) -> Stated:
        return Stated.model_validate(self.report)

    @cached_property
    def raw(self) -> MicroRaw | None:
        """The raw records, checked; None for a report without them (an older one: its
        flat table) or with records that do not check."""
        try:
            return micro_raw_of(self.typed) if self.report.get("arms") else None
        except (Disagreement, ResultError, ValidationError):
            return None

    @cached_property
    def derived(self) -> MicroDerived | None:
        try:
            return derive_micro(self.raw) if self.raw else None
        except (Disagreement, ResultError):
            return None


CACHED = 4  # reports kept: a command renders one at a time
_CACHE: dict[int, tuple[bytes, Micro]] = {}


def micro_of(report: Dict) -> Micro:
    """The report's ``Micro``: made once for all the tables, figures and the verdict of
    one report (held by identity and content: a report changed since is read anew)."""
    try:
        stamp = marshal.dumps(report, 2)
    except ValueError:  # not plain JSON data: nothing to hold it by
        return Micro(report)
    held = _CACHE.pop(id(report), None)
    if held is None or held[0] != stamp or held[1].report is not report:
        held = (stamp, Micro(report))
    _CACHE[id(report)] = held  # the newest last; the report is held, so its id is not reused
    while len(_CACHE) > CACHED:
        del _CACHE[next(iter(_CACHE))]
    return held[1]


def speedup_blocks(stated: Stated) -> dict[str, Compared]:
    """``<arm>_vs_<base>`` -> the paired per-repeat ratio block as the report states it."""
    if stated.speedups:
        return {k: v for k, v in stated.speedups.items() if v is not None}
    return {"deferred_vs_eager": stated.speedup} if stated.speedup else {}


def payload_blocks(stated: Stated) -> dict[str, Compared]:
    """``<arm>_vs_<base>`` -> its payload-cost ratio block (``control.payload_speedups``)."""
    ratios = stated.control.payload_speedups if stated.control else None
    return {k: v for k, v in (ratios or {}).items() if v is not None}


def ends(c: Compared) -> tuple[float | None, float | None, str]:
    """A comparison's interval: its low and high ends and its kind (ci, prediction, range
    or none); numbers missing, not finite or of the wrong type are None."""
    iv = c.interval or Compared.Spread()
    return iv.low, iv.high, iv.kind or "none"


# ---------------------------------------------------------------------------- the tables


def micro_stages(m: Micro) -> Table:
    """Per arm: each stage's median, p10, p90 (ms) and bytes, then the arm's TOTAL (its
    figures with a ``column``, ``results.micro_figures.FIGURES``)."""
    shown = [f for f in FIGURES if f.column]
    kinds = {f.column or "": "int" if f.column == "bytes" else "num" for f in shown}
    cols = [col("arm"), col("stage"), *(col(c, kind) for c, kind in kinds.items())]
    table = Table("micro.stages", "Stages (ms, bytes)", cols)
    d = m.derived
    if d is None:  # an older report: its flat table, shown as written
        for i, r in enumerate(m.typed.results):
            table.add(
                {c.key: r.get(c.key) for c in cols},
                {c.key: pointer("results", i, c.key) for c in cols[2:]},
            )
        return table
    for arm, block in m.typed.arms.items():
        for stage, st in block.stages.items():
            # the stated summary is the raw samples' (checked on reading): shown from them
            ran = st.applicable is not False and st.summary_ms is not None
            ms = d.arms[arm].stages.get(stage) if ran else None
            at = ("arms", arm, "stages", stage)
            cells = {f"{k}_ms": (getattr(ms, k) if ms else None, pointer(*at, "summary_ms", k))
                     for k in ("median", "p10", "p90")}  # fmt: skip
            cells["bytes"] = (st.bytes, pointer(*at, "bytes"))
            table.add(
                {"arm": arm, "stage": stage} | {k: v for k, (v, _) in cells.items()},
                {k: src for k, (_, src) in cells.items()},
            )
        table.add(
            {"arm": arm, "stage": "TOTAL"} | {f.column or "": f.value(d, arm) for f in shown},
            {f.column or "": pointer("arms", arm, *f.at.split("/")) for f in shown if f.at},
        )
    return table


def micro_comparisons(m: Micro) -> Table:
    """One row per comparison: the per-repeat paired ratio (base total / arm total) with
    its interval (``results.micro``) and, when control rounds ran, the ratio of payload
    costs with its own (the report's ``control.payload_speedups``)."""
    cols = [
        col("comparison"),
        col("ratio", "x", "time ratio (base / arm)"),
        col("interval", "span", "its interval"),
        col("repeats", "int"),
        col("payload_ratio", "x", "payload-cost ratio"),
        col("payload_interval", "span", "its interval"),
    ]
    table = Table(
        "micro.comparisons",
        "Comparisons (per-repeat paired ratios)",
        cols,
        about="time ratio > 1: the arm is faster than its base; each repeat runs "
        "the arms back to back, so the ratio is taken per repeat (median shown)",
    )
    payload = payload_blocks(m.stated)
    d = m.derived
    for key, sp in d.speedups.items() if d else []:
        arm, _, base = key.partition("_vs_")
        at, iv = pointer("speedups", key), sp.interval
        row = {
            "comparison": f"{arm} vs {base}",
            "ratio": sp.ratio.median,
            "interval": Span(iv.low, iv.high, iv.kind, "x"),
            "repeats": sp.ratio.n_units,
        }
        srcs: dict[str, Any] = {
            "ratio": f"{at}/median",
            "interval": (f"{at}/interval/low", f"{at}/interval/high"),
            "repeats": f"{at}/n_units",
        }
        if (p := payload.get(key)) is not None:
            pat = pointer("control", "payload_speedups", key)
            row |= {"payload_ratio": p.median, "payload_interval": Span(*ends(p), "x")}
            pend = (f"{pat}/interval/low", f"{pat}/interval/high")
            srcs |= {"payload_ratio": f"{pat}/median", "payload_interval": pend}
        table.add(row, srcs)
    if not payload:
        table.columns = table.columns[:4]
    return table


def micro_copies(m: Micro) -> Table:
    table = Table(
        "micro.copies",
        "Copies (ledger per arm and stage, one repeat)",
        [
            col("arm"),
            *(col(c, "int" if c in ("bytes", "count") else "text") for c in COPY_COLUMNS),
        ],
    )
    for arm, block in m.typed.arms.items():
        for i, copy in enumerate(block.copies or []):
            row, at = copy.model_dump(), ("arms", arm, "copies", i)  # its columns as written
            table.add(
                {"arm": arm, **{c: row.get(c) for c in COPY_COLUMNS}},
                {c: pointer(*at, c) for c in COPY_COLUMNS},
            )
    return table


def micro_decisions(m: Micro) -> Table:
    s = m.stated.summary
    cols = ["image", "defer", "reason", "raw_bytes", "processed_bytes"]
    return rows_table(
        "micro.decisions",
        "Deferral decision per image (deferred arm)",
        s.decisions if s else None,
        "/summary/decisions",
        cols,
    )


def micro_control(m: Micro) -> Table | None:
    ctl = m.stated.control
    if ctl is None or not ctl.rows:
        return None
    table = rows_table(
        "micro.control",
        "Control plane and payload cost",
        ctl.rows,
        "/control/rows",
        list(CONTROL_COLUMNS),
    )
    table.columns = [
        col(c, "text" if c in ("arm", "stage", "emulation") else "num") for c in CONTROL_COLUMNS
    ]
    table.about = (
        f"control: every arm with {ctl.payload_images}; payload cost = arm "
        "minus its control (ms), interval over both sides"
    )
    return table


def micro_apart(m: Micro) -> Table | None:
    """The stages whose cost is the emulation's (the metadata gather) or a stand-in's (a
    host copy for a device copy on CPU), shown apart in the payload cost."""
    ctl = m.typed.control
    if ctl is None or not ctl.emulation_only:
        return None
    rows = [r.model_dump() for r in ctl.emulation_only]
    title = "Emulation-only stages and stand-ins (shown apart)"
    table = rows_table("micro.apart", title, rows, "/control/emulation_only",
                       ["stage", "kind", "arms", "why"])  # fmt: skip
    table.rows = [r | {"arms": _listed(r.get("arms"))} for r in table.rows]
    for src in table.sources:
        src.pop("arms", None)  # a list, written as text here
    return table


def _listed(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else ""


def noisy_stages(d: MicroDerived | None) -> dict[str, list[tuple[str, float]]]:
    """Per arm: (stage or "total", IQR / median) of every measured quantity whose spread
    torch.utils.benchmark would warn about (stages under 1 ms are not counted)."""
    out: dict[str, list[tuple[str, float]]] = {}
    for arm, f in d.arms.items() if d else []:
        for name, m in [*f.stages.items(), ("total", f.total)]:
            if not m.n or not m.warnings or not math.isfinite(m.noise):
                continue
            if name == "total" or m.median >= NOISE_MIN_MS:
                out.setdefault(arm, []).append((name, m.noise))
    return out


def micro_noise(m: Micro) -> Table | None:
    noisy = noisy_stages(m.derived)
    if not noisy:
        return None
    table = Table(
        "micro.noise",
        "Noise: stages whose IQR is 10% of the median or more",
        [col("arm"), col("noisy (IQR / median)")],
        about="torch.utils.benchmark's thresholds: 10% could indicate system "
        "fluctuation, 25% suggests significant environmental influence",
    )
    for arm, items in noisy.items():
        text = ", ".join(f"{name} {noise:.0%}" for name, noise in items)
        table.add({"arm": arm, "noisy (IQR / median)": text})
    return table


def micro_tables(m: Micro) -> list[Table]:
    out = [
        micro_stages(m),
        micro_comparisons(m),
        micro_copies(m),
        micro_decisions(m),
        micro_control(m),
        micro_apart(m),
        micro_noise(m),
    ]
    return [t for t in out if t is not None]
