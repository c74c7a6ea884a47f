"""The control plane of ``micro`` and each arm's payload cost.

Every micro run also sends every arm through the same pipeline with a minimal payload (as
many images as the run's, one merged token each): what a request costs whatever its
pixels (process hops, pickling, collectives, barriers). An arm's **payload cost** is its
time minus its own control's, per stage and in total; speedups on payload cost compare
what the pixels cost in each arm, without the control plane every arm pays alike.

Control rounds are unpaired with the measured repeats (a few rounds, spread over them), so
a payload cost's interval resamples both sides independently (``stats.difference``). A
payload speedup is the ratio of two payload costs; its interval draws the same repeats for
both arms (they run back to back) and each arm's control rounds independently
(``stats.ratio_of_differences``). Stages whose cost exists only in this emulation are named and
shown apart (``emulation_only``). The costs and ratios are derived in
``results.micro_payload``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kimi_bench.bench.micro_records import (
    ApartStage,
    ArmBlock,
    ControlFloor,
    ControlRow,
    ControlSection,
    Cost,
    PayloadBlock,
    Ratio,
    Repeat,
)
from kimi_bench.infra.stats.format import fmt_ms
from kimi_bench.pipeline import CPU_STAND_IN, STAGES, with_role
from kimi_bench.results.micro_payload import PayloadCost, payload_costs, payload_ratio

Recs = list[Repeat]

GATHER_WHY = (
    "ranks share a GPU (or there is no CUDA), so the encoder-output gather is a gloo "
    "all_gather_object of metadata between processes; the runtime gathers the encoder "
    "outputs over NCCL on the device, which this cost does not predict"
)
STAND_IN_WHY = (
    "no CUDA: a host copy stands in for the runtime's device copy; the stage exists in the "
    "runtime, its cost here does not predict it"
)


def emulation_stages(by_arm: dict[str, Recs]) -> list[ApartStage]:
    """Stages whose cost here is the emulation's, read from the copy ledger of one repeat
    per arm: ``emulation_only`` (the runtime has no such cost: the metadata gather) and
    ``stand_in`` (a runtime device copy done as a host copy on CPU), with the arms."""
    out: dict[str, ApartStage] = {}
    for arm, recs in by_arm.items():
        for row in recs[0]["copies"] if recs else []:
            if row["op"] == "gather_metadata":
                kind, why = "emulation_only", GATHER_WHY
            elif CPU_STAND_IN in str(row.get("mirrors")):
                kind, why = "stand_in", STAND_IN_WHY
            else:
                continue
            e = out.setdefault(row["stage"], ApartStage(stage=row["stage"], kind=kind, why=why,
                                                        arms=[]))  # fmt: skip
            if kind == "emulation_only":  # the stronger claim wins for the stage
                e["kind"], e["why"] = kind, why
            if arm not in e["arms"]:
                e["arms"].append(arm)
    order = {s: i for i, s in enumerate(STAGES)}
    return sorted(out.values(), key=lambda e: order.get(e["stage"], len(order)))


def _cost(c: PayloadCost) -> Cost:
    return Cost(arm_ms=c.arm_ms, control_ms=c.control_ms, payload_ms=c.payload_ms,
                interval=c.interval)  # fmt: skip


def payload_block(recs: Recs, ctl: Recs, apart: list[str]) -> PayloadBlock:
    """One arm's payload cost per stage, in total, and in total without the
    emulation-only stages (``apart``)."""
    stages = [s for s in STAGES if recs and s in recs[0]["stage_ms"] and s in ctl[0]["stage_ms"]]
    kept = [s for s in stages if s not in apart]
    costs = [_cost(c) for c in payload_costs(recs, ctl, stages, kept)]
    return PayloadBlock(
        stages=dict(zip(stages, costs, strict=False)),
        total=costs[-2],
        total_without_emulation=costs[-1],
    )


def payload_speedups(
    samples: dict[str, Recs], control: dict[str, Recs], keys: list[str]
) -> dict[str, Ratio]:
    """``<arm>_vs_<base>`` on payload cost: the base's payload cost over the arm's (median
    minus control median each), with an interval that draws the same repeats for both arms
    and each arm's control rounds independently (``stats.ratio_of_differences``). None
    with the reason when a payload cost is not above its control."""
    out: dict[str, Ratio] = {}
    for key in keys:
        arm, base = key.split("_vs_")
        r = payload_ratio(samples[base], control[base], samples[arm], control[arm], (arm, base))
        value = r.value
        entry = Ratio(
            median=None if math.isnan(value) else value,
            base_payload_ms=r.base_payload_ms,
            arm_payload_ms=r.arm_payload_ms,
            interval=r.interval,
        )
        if math.isnan(value):
            entry["reason"] = (
                f"the payload cost of {arm} or {base} is not above its control (within the "
                "control plane's noise): no ratio"
            )
        out[key] = entry
    return out


def control_section(
    samples: dict[str, Recs],
    control: dict[str, Recs],
    blocks: dict[str, ArmBlock],
    speed_keys: list[str],
    floor_ms: float | None,
    payload_desc: str,
) -> ControlSection | None:
    """``data.control``: the control arms (``blocks``, made like ``data.arms`` by
    ``micro_report.arms_part``), each arm's payload cost, payload speedups, the
    emulation-only stages and the control + data floor. None when no control round
    completed (``--control-repeats 0`` or a run stopped early)."""
    arms = [a for a in samples if samples[a] and control.get(a)]
    if not arms:
        return None
    apart = emulation_stages({a: control[a] for a in arms})
    only = [e["stage"] for e in apart if e["kind"] == "emulation_only"]
    payload = {a: payload_block(samples[a], control[a], only) for a in arms}
    for e in apart:
        costs = {a: payload[a]["stages"].get(e["stage"]) for a in arms}
        e["control_ms"] = {a: c["control_ms"] if c else None for a, c in costs.items()}
        e["arm_ms"] = {a: c["arm_ms"] if c else None for a, c in costs.items()}
    ctl_med = {a: payload[a]["total"]["control_ms"] for a in arms}
    cheapest = min(arms, key=lambda a: ctl_med[a])
    floor = ControlFloor(
        data_floor_ms=floor_ms,
        control_ms=ctl_med[cheapest],
        control_arm=cheapest,
        floor_ms=ctl_med[cheapest] + floor_ms if floor_ms else None,
        made_of="control + data floor: the cheapest arm's control plane (the pipeline "
        "with no pixels to speak of) + the data floor (each owner's pinned H2D of its raw "
        "bytes + the materialize kernel)",
    )
    keys = [k for k in speed_keys if all(a in arms for a in k.split("_vs_"))]
    return ControlSection(
        payload_images=payload_desc,
        rounds=min(len(control[a]) for a in arms),
        arms=blocks,
        payload=payload,
        payload_speedups=payload_speedups(samples, control, keys),
        emulation_only=apart,
        floor=floor,
        rows=control_rows(payload, apart),
    )


def control_rows(payload: dict[str, PayloadBlock], apart: list[ApartStage]) -> list[ControlRow]:
    """The table (Markdown, HTML, payload.csv): per arm and stage, the arm's median, its
    control's, the payload cost with its interval; emulation-only stages flagged."""
    kinds = {e["stage"]: e["kind"] for e in apart}
    rows: list[ControlRow] = []
    for arm, block in payload.items():
        items = [*block["stages"].items(), ("TOTAL", block["total"]),
                 ("TOTAL without emulation-only", block["total_without_emulation"])]  # fmt: skip
        for stage, c in items:
            iv = c["interval"]
            rows.append(ControlRow(
                arm=arm, stage=stage, arm_ms=c["arm_ms"], control_ms=c["control_ms"],
                payload_ms=c["payload_ms"], payload_low_ms=iv["low"], payload_high_ms=iv["high"],
                interval=iv["kind"], emulation=kinds.get(stage, ""),
            ))  # fmt: skip
    return rows


def control_notes(section: ControlSection | None, rounds: int) -> list[str]:
    """What the control plane is, what each arm's payload costs, what is emulation-only."""
    if not section:
        return [] if rounds else ["control plane not measured (--control-repeats 0)."]
    pay = section["payload"]
    costs = ", ".join(
        f"{a} {fmt_ms(p['total']['arm_ms'])} = control {fmt_ms(p['total']['control_ms'])} + "
        f"payload {fmt_ms(p['total']['payload_ms'])}"
        for a, p in pay.items()
    )
    fl = section["floor"]
    out = [
        f"control plane: every arm also ran {section['rounds']} round(s) with "
        f"{section['payload_images']}, spread over the repeats; payload cost = arm minus its "
        f"control (intervals resample both sides): {costs}.",
    ]
    if fl["floor_ms"]:
        out.append(
            f"control + data floor {fmt_ms(fl['floor_ms'])} = {fl['control_arm']} control "
            f"{fmt_ms(fl['control_ms'])} + data floor {fmt_ms(fl['data_floor_ms'])} (pinned "
            "H2D + kernel)."
        )
    stand_ins = []
    for e in section["emulation_only"]:
        if e["kind"] != "emulation_only":
            stand_ins.append(f"{e['stage']} ({', '.join(e['arms'])})")
            continue
        ms = ", ".join(f"{a} {fmt_ms(v)}" for a, v in e["control_ms"].items() if v is not None)
        out.append(
            f"EMULATION-ONLY stage {e['stage']} (control: {ms}): {e['why']}; shown apart "
            "(payload rows 'TOTAL without emulation-only')."
        )
    if stand_ins:
        out.append(f"stages with a stand-in copy: {'; '.join(stand_ins)}: {STAND_IN_WHY}.")
    return out


def summary_fields(section: ControlSection | None, arms: list[str]) -> dict[str, Any]:
    """Flat summary fields besides the figures each arm's control rounds give (its
    control median, payload cost and payload speedups: ``results.micro_figures.FIGURES``)."""
    if not section:
        return {"control_rounds": 0}
    out: dict[str, Any] = {"control_rounds": section["rounds"]}
    base, change = with_role(arms, "baseline"), with_role(arms, "change")
    d = section["payload_speedups"].get(f"{change}_vs_{base}") or {}
    out["payload_speedup_interval"] = d.get("interval")
    out["emulation_only_stages"] = [
        e["stage"] for e in section["emulation_only"] if e["kind"] == "emulation_only"
    ]
    return out


@dataclass(frozen=True)
class ControlPart:
    """The control rounds' part of a ``micro`` report: ``data.control``, its notes and
    its flat summary fields."""

    section: ControlSection | None
    notes: list[str]
    summary: dict[str, Any]


def control_part(section: ControlSection | None, rounds: int, names: list[str]) -> ControlPart:
    """``control_section`` with its notes and summary fields (``rounds``: the control
    repeats asked for; ``names``: the arms asked for)."""
    return ControlPart(section, control_notes(section, rounds), summary_fields(section, names))
