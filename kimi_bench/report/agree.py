"""Derived blocks against the raw data they came from, checked when a report is read.

A report carries raw data (micro: one record per arm and repeat; serve-ab: one row per
request; parity: one row per input) and blocks derived from it (per-stage samples and
their summaries, totals, speedups, medians, byte counts, per-rate rows, A/B deltas, the
summary). Every consumer reads the derived blocks (figures, HTML, ``compare``, the gate),
so a report whose derived blocks disagree with its raw data (a hand-edited number, a
partial rewrite, a writer bug) is refused here, once, for every reader, with the field
named: ``check_envelope`` (``report.model``) calls :func:`disagreement` after the types
have been validated (``report.kinds``). Raw rows are also unique by their identity (a
micro repeat by its index, a request by rate, arm, repeat and id): a duplicated row would
count twice.

This module holds the shared helpers and the micro checks; ``agree_rows`` the row-based
kinds and the entry point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from kimi_bench.infra.stats import Measurement
from kimi_bench.report.roles import baseline_arm, change_arm
from kimi_bench.results.base import ResultError, typed_records
from kimi_bench.results.micro import (
    ArmFigures,
    LedgerCopy,
    MicroDerived,
    MicroRaw,
    MicroRepeat,
    Speedup,
    arm_figures,
    derive_micro,
    paired_speedup,
)
from kimi_bench.results.micro_figures import stated_figures

REL_TOL = 1e-6  # derived from the same floats: only rounding may differ
EDITED = "the summary disagrees with its raw data (an edited or inconsistent report)"
DERIVED = "a derived block disagrees with the raw data (an edited or inconsistent report)"

Dict = dict[str, Any]


class Disagreement(ValueError):
    """A derived block that disagrees with the raw data, or raw data that is unusable."""


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-9)


def number(value: Any, where: str, *, minimum: float | None = 0.0) -> float:
    """A finite number (>= ``minimum``), else Disagreement naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Disagreement(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise Disagreement(f"{where} is not finite ({value!r})")
    if minimum is not None and value < minimum:
        raise Disagreement(f"{where} is negative ({value!r}): times, bytes and counts are >= 0")
    return float(value)


def agree(stated: Any, derived: float | None, where: str) -> None:
    """A stated value must equal the value derived from raw data (absent: nothing to check)."""
    if stated is None:
        return
    if derived is None:
        raise Disagreement(f"{where} says {stated!r} but the raw data gives None: {EDITED}")
    s = number(stated, where, minimum=None)
    if not close(s, derived):
        raise Disagreement(f"{where} says {s:.6g} but the raw data gives {derived:.6g}: {EDITED}")


def agree_flag(stated: Any, derived: bool, where: str) -> None:
    if stated is not None and stated is not derived:
        raise Disagreement(f"{where} says {stated!r} but the raw data gives {derived!r}: {EDITED}")


def as_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise Disagreement(f"{where} is missing or not a list: no raw data to check")
    return value


def block(raw: Dict, *keys: str) -> Dict:
    """``raw[k1][k2]...`` when each level is an object, else {}."""
    out: Any = raw
    for k in keys:
        out = out.get(k) if isinstance(out, dict) else None
    return out if isinstance(out, dict) else {}


# Summary numbers a serialized Measurement carries, and how each is derived from samples.
_STATS: dict[str, Callable[[Measurement], float]] = {
    "n": lambda m: float(m.n),
    "median": lambda m: m.median,
    "mean": lambda m: m.mean,
    "p10": lambda m: m.p10,
    "p25": lambda m: m.p25,
    "p75": lambda m: m.p75,
    "p90": lambda m: m.p90,
    "iqr": lambda m: m.iqr,
    "min": lambda m: m.min,
    "max": lambda m: m.max,
}


def same_samples(stated: Any, derived: Sequence[float], where: str, source: str) -> None:
    """A block's samples must be exactly the raw values (in order)."""
    xs = as_list(stated, where)
    if len(xs) != len(derived):
        raise Disagreement(
            f"{where} holds {len(xs)} samples but {source} has {len(derived)}: {DERIVED}"
        )
    for i, (a, b) in enumerate(zip(xs, derived, strict=True)):
        if not close(number(a, f"{where}[{i}]", minimum=None), b):
            raise Disagreement(f"{where}[{i}] is {a:.6g} but {source} gives {b:.6g}: {DERIVED}")


def measurement_agrees(body: Any, m: Measurement, where: str, source: str) -> None:
    """A serialized Measurement (``{samples, median, p90, ...}``) against the raw values'
    (``m``): its samples (``samples`` or ``samples_ms``) and every summary number it states."""
    if not isinstance(body, dict):
        return
    for key in ("samples", "samples_ms"):
        if key in body:
            same_samples(body[key], m.samples, f"{where}.{key}", source)
    if not m.n:
        return
    for key, derive in _STATS.items():
        if isinstance(body.get(key), (int, float)) and not isinstance(body.get(key), bool):
            agree(body[key], derive(m), f"{where}.{key}")


# ------------------------------------------------------------------------------- micro


def micro_repeats(raw: Dict, arm: str, block_name: str = "repeats") -> list[MicroRepeat]:
    """One arm's raw records: numbers, totals that are the sum of their stages, and each
    repeat once (``iteration`` unique; no more records than planned repeats)."""
    reps = as_list(block(raw, block_name).get(arm), f"{block_name}.{arm}")
    seen: dict[Any, int] = {}
    for i, rep in enumerate(reps):
        at = f"{block_name}.{arm}[{i}]"
        if not isinstance(rep, dict):
            raise Disagreement(f"{at} is not an object")
        total = number(rep.get("total_ms"), f"{at}.total_ms")
        stages = rep.get("stage_ms")
        if not isinstance(stages, dict):
            raise Disagreement(f"{at}.stage_ms is missing")
        parts = [number(v, f"{at}.stage_ms.{s}") for s, v in stages.items()]
        if not math.isclose(sum(parts), total, rel_tol=1e-6, abs_tol=1e-6):
            raise Disagreement(
                f"{at}.total_ms {total:.6g} is not the sum of its stages ({sum(parts):.6g})"
            )
        for s, v in (rep.get("stage_bytes") or {}).items():
            number(v, f"{at}.stage_bytes.{s}")
        key = rep.get("iteration")
        if key is not None:
            if key in seen:
                raise Disagreement(
                    f"{at} repeats {block_name}.{arm}[{seen[key]}] (iteration {key!r}): each "
                    "repeat is recorded once; a duplicated record would count twice"
                )
            seen[key] = i
    cfg = block(raw, "config")
    planned = cfg.get("repeats" if block_name == "repeats" else "control_repeats")
    launches = cfg.get("launches", 1)  # each launch runs the repeats (reports before: one)
    if isinstance(planned, int) and isinstance(launches, int) and not isinstance(planned, bool):
        planned *= max(1, launches)
    if isinstance(planned, int) and not isinstance(planned, bool) and len(reps) > planned > 0:
        raise Disagreement(
            f"{block_name}.{arm} holds {len(reps)} records but the run planned {planned}: "
            "a record is duplicated or foreign"
        )
    return typed(reps, MicroRepeat, f"{block_name}.{arm}")


def typed(records: list[Any], model: Any, where: str) -> Any:
    try:
        return typed_records(records, model, where)
    except ResultError as exc:
        raise Disagreement(str(exc)) from None


def micro_raw(raw: Dict) -> MicroRaw:
    """A report dict's raw micro records, checked (``micro_repeats``), typed."""
    arms = [
        str(a) for a in block(raw, "config").get("arms") or [] if str(a) in block(raw, "repeats")
    ]
    base, change = _roles(raw, arms)
    has_control = bool(raw.get("control_repeats"))
    control = {a: micro_repeats(raw, a, "control_repeats") for a in arms
               if has_control and a in block(raw, "control_repeats")}  # fmt: skip
    floor = raw.get("floor_ms")
    return MicroRaw(
        arms=tuple(arms),
        baseline=base or None,
        change=change or None,
        repeats={a: micro_repeats(raw, a) for a in arms},
        control=control,
        ledger={a: _ledger(raw, a) for a in arms},
        floor_ms=None if floor is None else number(floor, "floor_ms"),
    )


def _ledger(raw: Dict, arm: str) -> list[LedgerCopy]:
    """The arm's copy ledger (one repeat): numbers where numbers belong."""
    copies = as_list(block(raw, "arms", arm).get("copies"), f"arms.{arm}.copies")
    for i, row in enumerate(copies):
        number(row.get("bytes"), f"arms.{arm}.copies[{i}].bytes")
        number(row.get("count", 0), f"arms.{arm}.copies[{i}].count")
    return typed(copies, LedgerCopy, f"arms.{arm}.copies")


def arm_block_agrees(arm_block: Any, figures: ArmFigures, where: str, source: str) -> None:
    """``arms.<arm>`` (or ``control.arms.<arm>``): total and per-stage samples and their
    summaries against the repeats' records."""
    if not isinstance(arm_block, dict):
        raise Disagreement(f"{where} is missing")
    total = arm_block.get("total_ms")
    if not isinstance(total, dict) or "samples" not in total:
        raise Disagreement(f"{where}.total_ms is missing or not a list: no raw data to check")
    measurement_agrees(total, figures.total, f"{where}.total_ms", f"{source}[*].total_ms")
    if figures.moved_bytes is not None:
        agree(arm_block.get("moved_bytes"), figures.moved_bytes, f"{where}.moved_bytes")
    for stage, body in (arm_block.get("stages") or {}).items():
        m = figures.stages.get(stage)
        if not isinstance(body, dict) or m is None:
            continue
        at, src = f"{where}.stages.{stage}", f"{source}[*].stage_ms.{stage}"
        measurement_agrees(body, m, at, src)
        measurement_agrees(body.get("summary_ms"), m, f"{at}.summary_ms", src)


def _roles(raw: Dict, arms: list[str]) -> tuple[str, str]:
    """(baseline, change) as the report records them (``report.roles``; "" for none)."""
    cfg = block(raw, "config")
    return baseline_arm(cfg, arms) or "", change_arm(cfg, arms) or ""


def interval_agrees(stated: Any, sp: Speedup, where: str) -> None:
    """A speedup's stated interval against the one its per-repeat values and their launches
    give (``stats.launches.speedup_interval``: the same function made it)."""
    if not isinstance(stated, dict) or not sp.ratio.n:
        return
    derived = sp.interval
    if stated.get("kind") != derived.kind:
        raise Disagreement(
            f"{where}.kind is {stated.get('kind')!r} but the repeats' values over "
            f"{len(set(sp.launches))} launch(es) give {derived.kind!r}: {DERIVED}"
        )
    for key in ("low", "high"):
        value = getattr(derived, key)
        if math.isfinite(value):
            agree(stated.get(key), value, f"{where}.{key}")


def _ratios(raw: Dict, mraw: MicroRaw, d: MicroDerived) -> None:
    """The speedup blocks: the baseline over the change per repeat (``speedup``), and each
    ``speedups.<x>_vs_<y>`` (y's total over x's, per repeat), with their intervals (from
    the repeats' launches)."""
    pairs = [("speedup", f"{d.change}_vs_{d.baseline}")]
    pairs += [(f"speedups.{k}", k) for k in block(raw, "speedups")]
    for where, key in pairs:
        fast, _, slow = key.partition("_vs_")
        reps = mraw.repeats
        if fast not in reps or slow not in reps or len(reps[fast]) != len(reps[slow]):
            continue
        sp = d.speedups.get(key) or paired_speedup(mraw, key)
        body = block(raw, *where.split("."))
        measurement_agrees(body, sp.ratio, where, f"repeats {slow} / {fast}")
        interval_agrees(body.get("interval"), sp, f"{where}.interval")
        if where == "speedup":
            stated = block(raw, "summary").get("speedup_interval")
            interval_agrees(stated, sp, "summary.speedup_interval")


def _timeline(raw: Dict) -> None:
    """``timeline.<arm>``: the lanes of the repeat it names, exactly."""
    for arm, tl in block(raw, "timeline").items():
        if not isinstance(tl, dict) or "repeat" not in tl:
            continue
        reps = [r for r in block(raw, "repeats").get(arm) or [] if isinstance(r, dict)]
        rec = next((r for r in reps if r.get("iteration") == tl["repeat"]), None)
        if rec is not None and "timeline" in rec and rec["timeline"] != tl.get("ranks"):
            raise Disagreement(
                f"timeline.{arm} disagrees with repeats.{arm} (iteration {tl['repeat']!r}) "
                f"timeline: {DERIVED}"
            )


def figures_agree(stated: Dict, d: MicroDerived) -> None:
    """Every figure the summary states against the one its raw records give (``FIGURES``;
    an absent figure: nothing to check)."""
    for name, derived in stated_figures(d).items():
        if isinstance(derived, bool) or isinstance(stated.get(name), bool):
            if derived is not None:
                agree_flag(stated.get(name), derived, f"summary.{name}")
            continue
        agree(stated.get(name), derived, f"summary.{name}")


def micro_disagreement(raw: Dict) -> None:
    mraw = micro_raw(raw)
    if mraw.floor_ms is not None and mraw.floor_ms <= 0 and mraw.repeats.get(mraw.change or ""):
        raise Disagreement(f"floor_ms must be > 0, got {mraw.floor_ms!r}")
    d = derive_micro(mraw)
    for arm, figures in d.arms.items():
        arm_block_agrees(block(raw, "arms").get(arm), figures, f"arms.{arm}", f"repeats.{arm}")
        ctl_block = block(raw, "control", "arms").get(arm)
        if ctl_block is not None and mraw.control.get(arm):
            ctl = arm_figures(mraw.control[arm], arm)
            arm_block_agrees(ctl_block, ctl, f"control.arms.{arm}", f"control_repeats.{arm}")
    if not d.arms:
        return
    figures_agree(block(raw, "summary"), d)
    _ratios(raw, mraw, d)
    _timeline(raw)
