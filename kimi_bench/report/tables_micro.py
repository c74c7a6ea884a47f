"""The tables of a micro report (``report.tables``)."""

from __future__ import annotations

import math
from typing import Any

from kimi_bench.report import access
from kimi_bench.report.agree import Disagreement, micro_raw
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
from kimi_bench.results.micro import MicroDerived, derive_micro
from kimi_bench.results.micro_figures import FIGURES

# ------------------------------------------------------------------------------- micro


def derived(report: Dict) -> MicroDerived | None:
    """The report's figures (``results.micro``) from its raw records; None for a report
    without them (an older one: its flat table)."""
    try:
        return derive_micro(micro_raw(report)) if report.get("arms") else None
    except (Disagreement, ResultError):
        return None


def micro_stages(report: Dict) -> Table:
    """Per arm: each stage's median, p10, p90 (ms) and bytes, then the arm's TOTAL (its
    figures with a ``column``, ``results.micro_figures.FIGURES``)."""
    shown = [f for f in FIGURES if f.column]
    kinds = {f.column or "": "int" if f.column == "bytes" else "num" for f in shown}
    cols = [col("arm"), col("stage"), *(col(c, kind) for c, kind in kinds.items())]
    table = Table("micro.stages", "Stages (ms, bytes)", cols)
    d = derived(report)
    if d is None:  # an older report: its flat table
        for i, r in enumerate(report.get("results") or []):
            table.add(
                {c.key: r.get(c.key) for c in cols},
                {c.key: pointer("results", i, c.key) for c in cols[2:]},
            )
        return table
    for arm, block in report["arms"].items():
        for stage, st in (block.get("stages") or {}).items():
            summ = st.get("summary_ms") if st.get("applicable", True) else None
            summ = summ if isinstance(summ, dict) else {}
            at = ("arms", arm, "stages", stage)
            cells = {f"{k}_ms": (summ.get(k), pointer(*at, "summary_ms", k))
                     for k in ("median", "p10", "p90")}  # fmt: skip
            cells["bytes"] = (st.get("bytes"), pointer(*at, "bytes"))
            table.add(
                {"arm": arm, "stage": stage} | {k: v for k, (v, _) in cells.items()},
                {k: src for k, (_, src) in cells.items()},
            )
        table.add(
            {"arm": arm, "stage": "TOTAL"} | {f.column or "": f.value(d, arm) for f in shown},
            {f.column or "": pointer("arms", arm, *f.at.split("/")) for f in shown if f.at},
        )
    return table


def speedup_blocks(report: Dict) -> dict[str, tuple[str, Dict]]:
    """``<arm>_vs_<base>`` -> (its JSON pointer, the paired per-repeat ratio block)."""
    speed = report.get("speedups")
    if isinstance(speed, dict) and speed:
        return {k: (pointer("speedups", k), v) for k, v in speed.items() if isinstance(v, dict)}
    one = report.get("speedup")
    return {"deferred_vs_eager": ("/speedup", one)} if isinstance(one, dict) else {}


def payload_blocks(report: Dict) -> dict[str, tuple[str, Dict]]:
    ctl = report.get("control")
    ps = ctl.get("payload_speedups") if isinstance(ctl, dict) else None
    if not isinstance(ps, dict):
        return {}
    at = ("control", "payload_speedups")
    return {k: (pointer(*at, k), v) for k, v in ps.items() if isinstance(v, dict)}


def _ratio_cells(at: str, block: Dict) -> tuple[Any, Any, dict[str, Any]]:
    iv = access.sub(block, "interval")
    span = Span(iv.get("low"), iv.get("high"), str(iv.get("kind") or "none"), "x")
    return (
        block.get("median"),
        span,
        {"median": f"{at}/median", "span": (f"{at}/interval/low", f"{at}/interval/high")},
    )


def micro_comparisons(report: Dict) -> Table:
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
    payload = payload_blocks(report)
    d = derived(report)
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
        if key in payload:
            pat, pblock = payload[key]
            pmed, pspan, psrc = _ratio_cells(pat, pblock)
            row |= {"payload_ratio": pmed, "payload_interval": pspan}
            srcs |= {"payload_ratio": psrc["median"], "payload_interval": psrc["span"]}
        table.add(row, srcs)
    if not payload:
        table.columns = table.columns[:4]
    return table


def micro_copies(report: Dict) -> Table:
    table = Table(
        "micro.copies",
        "Copies (ledger per arm and stage, one repeat)",
        [
            col("arm"),
            *(col(c, "int" if c in ("bytes", "count") else "text") for c in COPY_COLUMNS),
        ],
    )
    for arm, block in (report.get("arms") or {}).items():
        for i, row in enumerate(block.get("copies") or []):
            at = ("arms", arm, "copies", i)
            table.add(
                {"arm": arm, **{c: row.get(c) for c in COPY_COLUMNS}},
                {c: pointer(*at, c) for c in COPY_COLUMNS},
            )
    return table


def micro_decisions(report: Dict) -> Table:
    rows = (report.get("summary") or {}).get("decisions") or []
    cols = ["image", "defer", "reason", "raw_bytes", "processed_bytes"]
    return rows_table(
        "micro.decisions",
        "Deferral decision per image (deferred arm)",
        rows,
        "/summary/decisions",
        cols,
    )


def micro_control(report: Dict) -> Table | None:
    ctl = report.get("control")
    if not isinstance(ctl, dict) or not ctl.get("rows"):
        return None
    table = rows_table(
        "micro.control",
        "Control plane and payload cost",
        ctl["rows"],
        "/control/rows",
        list(CONTROL_COLUMNS),
    )
    table.columns = [
        col(c, "text" if c in ("arm", "stage", "emulation") else "num") for c in CONTROL_COLUMNS
    ]
    table.about = (
        f"control: every arm with {ctl.get('payload_images')}; payload cost = arm "
        "minus its control (ms), interval over both sides"
    )
    return table


def micro_apart(report: Dict) -> Table | None:
    """The stages whose cost is the emulation's (the metadata gather) or a stand-in's (a
    host copy for a device copy on CPU), shown apart in the payload cost."""
    ctl = report.get("control")
    rows = ctl.get("emulation_only") if isinstance(ctl, dict) else None
    if not rows:
        return None
    title = "Emulation-only stages and stand-ins (shown apart)"
    table = rows_table("micro.apart", title, rows, "/control/emulation_only",
                       ["stage", "kind", "arms", "why"])  # fmt: skip
    table.rows = [r | {"arms": ", ".join(map(str, r.get("arms") or []))} for r in table.rows]
    for src in table.sources:
        src.pop("arms", None)  # a list, written as text here
    return table


def noisy_stages(report: Dict) -> dict[str, list[tuple[str, float]]]:
    """Per arm: (stage or "total", IQR / median) of every measured quantity whose spread
    torch.utils.benchmark would warn about (stages under 1 ms are not counted)."""
    out: dict[str, list[tuple[str, float]]] = {}
    d = derived(report)
    for arm, f in d.arms.items() if d else []:
        for name, m in [*f.stages.items(), ("total", f.total)]:
            if not m.n or not m.warnings or not math.isfinite(m.noise):
                continue
            if name == "total" or m.median >= NOISE_MIN_MS:
                out.setdefault(arm, []).append((name, m.noise))
    return out


def micro_noise(report: Dict) -> Table | None:
    noisy = noisy_stages(report)
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


def micro_tables(report: Dict) -> list[Table]:
    out = [
        micro_stages(report),
        micro_comparisons(report),
        micro_copies(report),
        micro_decisions(report),
        micro_control(report),
        micro_apart(report),
        micro_noise(report),
    ]
    return [t for t in out if t is not None]
