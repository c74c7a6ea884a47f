"""From ``micro`` repeats to a report: small functions over ``Measurement`` objects.

Raw samples stay in the report (``arms.<arm>.stages.<stage>.samples_ms``,
``arms.<arm>.total_ms.samples``, ``speedups``); every summary is derived from them by
``kimi_bench.infra.stats``. Speedups are paired per repeat (the arms of one repeat run back to
back); their interval is where a re-run's median falls, from the spread between the run's
process launches and within them (``stats.launches.rerun_interval``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from kimi_bench.bench.micro_records import (
    ArmBlock,
    Floor,
    Ratio,
    Repeat,
    Samples,
    StageRow,
)
from kimi_bench.domain.ledger import Ledger, sort_copies
from kimi_bench.infra.stats.format import fmt_ms, fmt_speedup, fmt_speedup_range
from kimi_bench.infra.stats.launches import PREDICTION
from kimi_bench.pipeline import STAGES, with_role
from kimi_bench.pipeline import arm as pipeline_arm
from kimi_bench.results.micro import (
    ArmFigures,
    MicroDerived,
    MicroRaw,
    MicroRepeat,
    arm_figures,
    derive_micro,
    ledger_rows,
    micro_repeats,
)

NOISE_MIN_MS = 1.0  # stages shorter than this are not flagged as noisy


def ledger_of(recs: list[Repeat]) -> Ledger:
    """The arm's copy ledger (its first repeat's), in pipeline order."""
    return Ledger().merge(sort_copies(recs[0]["copies"], STAGES)) if recs else Ledger()


def arm_block(recs: list[Repeat], fig: ArmFigures, ledger: Ledger) -> ArmBlock:
    """Per stage: bytes (from the ledger), raw samples and the derived summary; the arm's
    copy ledger (one repeat) and its totals (``fig``: the arm's figures, ``results.micro``)."""
    changed = [r["iteration"] for r in recs[1:] if r["copies"] != recs[0]["copies"]]
    totals = ledger.totals()
    return {
        "stages": {
            s: {
                "bytes": recs[0]["stage_bytes"].get(s, 0),
                "samples_ms": list(m.samples),
                "summary_ms": m.as_dict() if m.n else None,
            }
            for s, m in fig.stages.items()
        },
        "total_ms": fig.total.as_dict() if recs else None,
        "copies": ledger.rows(),
        "copy_totals": totals,
        "ledger_changed_in_repeats": changed,
        "h2d_bytes": totals["h2d_bytes"] if recs else None,
        "moved_bytes": totals["copied_bytes"] if recs else None,
    }


def stage_rows(arm: str, block: ArmBlock) -> list[StageRow]:
    rows: list[StageRow] = []
    for s, st in block["stages"].items():
        m = st["summary_ms"] or {}
        rows.append(StageRow(arm=arm, stage=s, median_ms=m.get("median"), p10_ms=m.get("p10"),
                             p90_ms=m.get("p90"), bytes=st["bytes"]))  # fmt: skip
    t = block["total_ms"] or {}
    rows.append(StageRow(arm=arm, stage="TOTAL", median_ms=t.get("median"), p10_ms=t.get("p10"),
                         p90_ms=t.get("p90"), bytes=block["moved_bytes"]))  # fmt: skip
    return rows


def speedup_blocks(d: MicroDerived) -> dict[str, Ratio]:
    """``<arm>_vs_<base>``: each paired speedup's block, with the re-run interval of its
    median and where its spread comes from (``spread``: between launches or within them)."""
    return {
        key: cast(Ratio, sp.ratio.as_dict() | {"interval": sp.interval.as_dict(),
                                               "spread": sp.spread.as_dict()})
        for key, sp in d.speedups.items()
    }  # fmt: skip


def noise_notes(arms: dict[str, ArmBlock]) -> list[str]:
    out = []
    for arm, block in arms.items():
        for _s, st in block["stages"].items():
            m = st["summary_ms"]
            if m and m["median"] >= NOISE_MIN_MS and m["warnings"]:
                out.append(f"noisy: {arm}/{m['warnings'][0]}")
        if block["total_ms"] and block["total_ms"]["warnings"]:
            out.append(f"noisy: {arm} {block['total_ms']['warnings'][0]}")
    return out


def where_time_goes(arms: dict[str, ArmBlock], floor_ms: float | None) -> list[str]:
    """The stages that dominate each arm, and what separates each non-eager arm from the
    floor (host-side work on the raw bytes)."""
    out = []
    for arm, block in arms.items():
        total = (block["total_ms"] or {}).get("median")
        if not total or math.isnan(total):
            continue
        meds = sorted(
            ((s, st["summary_ms"]["median"]) for s, st in block["stages"].items()
             if st["summary_ms"]),
            key=lambda x: -x[1],
        )[:3]  # fmt: skip
        top = ", ".join(f"{s} {fmt_ms(ms)} ({ms / total:.0%})" for s, ms in meds)
        out.append(f"where {arm} time goes (median {fmt_ms(total)}): {top}.")
        if pipeline_arm(arm).role != "baseline" and floor_ms:
            host = ("producer", "serialize", "to_rank0", "broadcast", "take_copy")
            host_ms = sum(
                (block["stages"][s]["summary_ms"] or {}).get("median") or 0.0
                for s in host
                if s in block["stages"]
            )
            out.append(
                f"{arm} vs floor: {fmt_ms(total)} vs {fmt_ms(floor_ms)}; {fmt_ms(host_ms)} "
                f"({host_ms / total:.0%}) is host-side work on the raw bytes ({', '.join(host)})"
                ": staging, carrier copies and pickling that the floor (each owner's H2D of "
                "its raw bytes + materialize) does not include."
            )
    return out


def floor_notes(floor: Floor, arms: dict[str, ArmBlock]) -> list[str]:
    """What the floor is made of and, if an arm's median beats it, that this is a
    measurement problem (the floor is work every arm does), never a ratio below 1."""
    if not floor.get("floor_ms"):
        return []
    parts = (
        f"floor {fmt_ms(floor['floor_ms'])} = H2D {fmt_ms(floor.get('h2d_ms'))} + "
        f"materialize {fmt_ms(floor.get('materialize_ms'))}"
        if floor.get("h2d_ms") is not None
        else f"floor {fmt_ms(floor['floor_ms'])}"
    )
    out = [f"{parts}: {floor.get('made_of') or 'one pinned H2D of the raw bytes + the kernel.'}"]
    for arm, block in arms.items():
        med = (block.get("total_ms") or {}).get("median")
        if med is not None and math.isfinite(med) and med < floor["floor_ms"]:
            out.append(
                f"MEASUREMENT PROBLEM: the {arm} median ({fmt_ms(med)}) is below the floor "
                f"({fmt_ms(floor['floor_ms'])}), which is work every arm does; the host was "
                "probably busy while the floor was measured. Neither number is reliable."
            )
    return out


def verdict(error: str | None, exact: list[bool], speed: dict[str, Ratio], arms: list[str]) -> str:
    if error:
        return f"INCOMPLETE after {len(exact) // max(1, len(arms) - 1)} repeats: {error}"
    if not all(exact):
        return "MISMATCH: the owner's BF16 outputs differ between arms (torch.equal)"
    if not exact:  # one arm (vllm-0.33 has one): no other arm's output to hold it against
        return f"{arms[0]} alone: no other arm's owner outputs to compare"
    parts = []
    for key, m in speed.items():
        iv, arm_base = m["interval"], key.split("_vs_")
        bounds = fmt_speedup_range(iv["low"] or math.nan, iv["high"] or math.nan)
        spread = {
            "ci": f" (95% CI {bounds}, one launch)",
            PREDICTION: f" (95% re-run interval {bounds}, {iv.get('n_units')} launches)",
            "range": f" (range {bounds}, too few repeats for a CI)",
        }.get(iv["kind"], "")
        parts.append(f"{arm_base[0]} {fmt_speedup(m['median'], arm_base[1])}{spread}")
    reps = len(exact) // max(1, len(arms) - 1)
    return "; ".join(parts) + f"; owner BF16 outputs identical in {reps} repeats"


@dataclass(frozen=True)
class ArmsPart:
    """What the arms' repeats give the report, derived in one place (``derived``,
    ``results.micro``): the blocks, the stage rows, the paired speedups' blocks, the
    verdict and the notes (``time_notes``: noise and where the time goes; ``floor_notes``:
    the floor)."""

    derived: MicroDerived
    arms: dict[str, ArmBlock]
    control_arms: dict[str, ArmBlock]  # the control rounds' blocks (``data.control.arms``)
    rows: list[StageRow]
    speed: dict[str, Ratio]
    verdict: str
    time_notes: list[str]
    floor_notes: list[str]

    @property
    def exact(self) -> list[bool]:
        return list(self.derived.exact)


def _typed(samples: Samples, arm: str) -> list[MicroRepeat]:
    return micro_repeats(samples[arm], arm)


def arms_part(
    samples: Samples, control: Samples, floor: Floor, names: list[str], error: str | None
) -> ArmsPart:
    """The arms' part of a ``micro`` report (``names``: the arms asked for, in order;
    ``control``: the control rounds' records, whose blocks are made here too)."""
    ledgers = {arm: ledger_of(recs) for arm, recs in samples.items()}
    raw = MicroRaw(
        arms=tuple(names),
        baseline=with_role(names, "baseline"),
        change=with_role(names, "change"),
        repeats={arm: _typed(samples, arm) for arm in samples},
        control={arm: _typed(control, arm) for arm in samples if control.get(arm)},
        ledger={a: ledger_rows(ledgers[a].rows(), a) for a, recs in samples.items() if recs},
        floor_ms=floor.get("floor_ms"),
    )
    d = derive_micro(raw)
    arms = {arm: arm_block(recs, d.arms[arm], ledgers[arm]) for arm, recs in samples.items()}
    ran = [a for a in samples if samples[a] and control.get(a)]  # the arms with control rounds
    control_arms = {
        a: arm_block(control[a], arm_figures(raw.control[a], a), ledger_of(control[a])) for a in ran
    }
    speed = speedup_blocks(d)
    exact = list(d.exact)
    return ArmsPart(
        derived=d,
        arms=arms,
        control_arms=control_arms,
        rows=[row for arm, block in arms.items() for row in stage_rows(arm, block)],
        speed=speed,
        verdict=verdict(error, exact, speed, names),
        time_notes=noise_notes(arms) + where_time_goes(arms, floor.get("floor_ms")),
        floor_notes=floor_notes(floor, arms),
    )
