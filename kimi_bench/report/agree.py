"""Derived blocks against the raw data they came from, checked when a report is read.

A report carries raw data (micro: one record per arm and repeat; serve-ab: one row per
request; parity: one row per input) and blocks derived from it (samples and their
summaries, totals, speedups, byte counts, per-rate rows, A/B deltas, the summary), which
every consumer reads. ``check_envelope`` (``report.model``) parses a report once into its
kind's model (``report.kinds``, which types the raw records too) and hands it to
:func:`disagreement` (``agree_rows``): each figure the model states is held against the
one ``results`` derives from the raw records, and raw records are unique by their
identity (a duplicated row would count twice). A report that disagrees is refused, once,
for every reader, with the field named. This module holds the shared helpers and micro's
checks; ``agree_serve`` serve-ab's, ``agree_rows`` parity's and the entry point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kimi_bench.infra.stats import Measurement
from kimi_bench.report.kinds import (
    Compared,
    MicroReport,
    RepeatRecord,
    SampleBlock,
    StageBlock,
)
from kimi_bench.report.roles import baseline_arm, change_arm
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


class Disagreement(ValueError):
    """A derived block that disagrees with the raw data, or raw data that is unusable."""


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-9)


def number(value: object, where: str, *, minimum: float | None = 0.0) -> float:
    """A finite number (>= ``minimum``), else Disagreement naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Disagreement(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise Disagreement(f"{where} is not finite ({value!r})")
    if minimum is not None and value < minimum:
        raise Disagreement(f"{where} is negative ({value!r}): times, bytes and counts are >= 0")
    return float(value)


def agree(stated: object, derived: float | None, where: str) -> None:
    """A stated value must equal the value derived from raw data (absent: nothing to check)."""
    if stated is None:
        return
    if derived is None:
        raise Disagreement(f"{where} says {stated!r} but the raw data gives None: {EDITED}")
    s = number(stated, where, minimum=None)
    if not close(s, derived):
        raise Disagreement(f"{where} says {s:.6g} but the raw data gives {derived:.6g}: {EDITED}")


# Summary numbers a serialized Measurement carries (each its attribute of the same name).
_STATS = ("n", "median", "mean", "p10", "p25", "p75", "p90", "iqr", "min", "max")


def same_samples(
    stated: Sequence[float], derived: Sequence[float], where: str, source: str
) -> None:
    """A block's samples must be exactly the raw values (in order)."""
    if len(stated) != len(derived):
        raise Disagreement(
            f"{where} holds {len(stated)} samples but {source} has {len(derived)}: {DERIVED}"
        )
    for i, (a, b) in enumerate(zip(stated, derived, strict=True)):
        if not close(a, b):
            raise Disagreement(f"{where}[{i}] is {a:.6g} but {source} gives {b:.6g}: {DERIVED}")


def measurement_agrees(body: SampleBlock | None, m: Measurement, where: str, source: str) -> None:
    """A serialized Measurement (``{samples, median, p90, ...}``) against the raw values'
    (``m``): its samples, when written, and every summary number it states."""
    if body is None:
        return
    if "samples" in body.model_fields_set:
        same_samples(body.samples, m.samples, f"{where}.samples", source)
    if not m.n:
        return
    stated = body.model_dump(include=set(_STATS))
    for key in _STATS:
        agree(stated[key], float(getattr(m, key)), f"{where}.{key}")


# ------------------------------------------------------------------------------- micro


def micro_repeats(recs: list[RepeatRecord], where: str, planned: int) -> list[MicroRepeat]:
    """One arm's records (``where`` names them): totals that are the sum of their stages,
    each repeat once (``iteration`` unique) and no more records than ``planned``."""
    seen: dict[object, int] = {}
    for i, rep in enumerate(recs):
        at, parts = f"{where}[{i}]", sum(rep.stage_ms.values())
        if not math.isclose(parts, rep.total_ms, rel_tol=1e-6, abs_tol=1e-6):
            raise Disagreement(
                f"{at}.total_ms {rep.total_ms:.6g} is not the sum of its stages ({parts:.6g})"
            )
        if (key := rep.iteration) is not None:
            if key in seen:
                raise Disagreement(
                    f"{at} repeats {where}[{seen[key]}] (iteration {key!r}): each "
                    "repeat is recorded once; a duplicated record would count twice"
                )
            seen[key] = i
    if planned and len(recs) > planned:
        raise Disagreement(
            f"{where} holds {len(recs)} records but the run planned {planned}: "
            "a record is duplicated or foreign"
        )
    return list(recs)


def micro_raw_of(report: MicroReport) -> MicroRaw:
    """A micro report's raw records, checked (``micro_repeats``)."""
    cfg, repeats, rounds = report.config, report.repeats or {}, report.control_repeats
    arms = [str(a) for a in cfg.arms if str(a) in repeats]
    runs = max(1, cfg.launches or 1)  # each launch runs the repeats (reports before: one)
    planned, planned_rounds = (cfg.repeats or 0) * runs, (cfg.control_repeats or 0) * runs
    return MicroRaw(
        arms=tuple(arms),
        baseline=baseline_arm(cfg, arms) or None,
        change=change_arm(cfg, arms) or None,
        repeats={a: micro_repeats(repeats[a], f"repeats.{a}", planned) for a in arms},
        control={
            a: micro_repeats(rounds[a], f"control_repeats.{a}", planned_rounds)
            for a in arms
            if a in rounds
        },
        ledger={a: _ledger(report, a) for a in arms},
        floor_ms=None if report.floor_ms is None else number(report.floor_ms, "floor_ms"),
    )


def _ledger(report: MicroReport, arm: str) -> list[LedgerCopy]:
    """The arm's copy ledger (one repeat): numbers where numbers belong."""
    where = f"arms.{arm}.copies"
    copies = report.arms[arm].copies if arm in report.arms else None
    if copies is None:
        raise Disagreement(f"{where} is missing or not a list: no raw data to check")
    for i, row in enumerate(copies):
        number(row.bytes, f"{where}[{i}].bytes")
        number(row.count or 0, f"{where}[{i}].count")
    return [LedgerCopy(bytes=r.bytes or 0, copies=r.copies is not False) for r in copies]


def arm_block_agrees(
    total: SampleBlock | None, stages: dict[str, StageBlock], figures: ArmFigures, where: str,
    source: str,
) -> None:  # fmt: skip
    """``arms.<arm>`` (or ``control.arms.<arm>``): total and per-stage samples and their
    summaries against the repeats' records."""
    if total is None or "samples" not in total.model_fields_set:
        raise Disagreement(f"{where}.total_ms is missing or not a list: no raw data to check")
    measurement_agrees(total, figures.total, f"{where}.total_ms", f"{source}[*].total_ms")
    for stage, body in stages.items():
        if (m := figures.stages.get(stage)) is None:
            continue
        at, src = f"{where}.stages.{stage}", f"{source}[*].stage_ms.{stage}"
        if "samples_ms" in body.model_fields_set:
            same_samples(body.samples_ms, m.samples, f"{at}.samples_ms", src)
        measurement_agrees(body.summary_ms, m, f"{at}.summary_ms", src)


def interval_agrees(stated: Compared.Spread | None, sp: Speedup, where: str) -> None:
    """A speedup's stated interval against the one its per-repeat values and their launches
    give (``stats.launches.speedup_interval``: the same function made it)."""
    if stated is None or not sp.ratio.n:
        return
    derived = sp.interval
    if stated.kind != derived.kind:
        raise Disagreement(
            f"{where}.kind is {stated.kind!r} but the repeats' values over "
            f"{len(set(sp.launches))} launch(es) give {derived.kind!r}: {DERIVED}"
        )
    ends = {"low": (stated.low, derived.low), "high": (stated.high, derived.high)}
    for key, (given, value) in ends.items():
        if math.isfinite(value):
            agree(given, value, f"{where}.{key}")


def _ratios(report: MicroReport, mraw: MicroRaw, d: MicroDerived) -> None:
    """The speedup blocks: the baseline over the change per repeat (``speedup``), and each
    ``speedups.<x>_vs_<y>`` (y's total over x's, per repeat), with their intervals (from
    the repeats' launches)."""
    blocks = [("speedup", f"{d.change}_vs_{d.baseline}", report.speedup)]
    blocks += [(f"speedups.{k}", k, b) for k, b in (report.speedups or {}).items()]
    for where, key, body in blocks:
        fast, _, slow = key.partition("_vs_")
        reps = mraw.repeats
        if fast not in reps or slow not in reps or len(reps[fast]) != len(reps[slow]):
            continue
        sp = d.speedups.get(key) or paired_speedup(mraw, key)
        measurement_agrees(body, sp.ratio, where, f"repeats {slow} / {fast}")
        interval_agrees(body.interval if body else None, sp, f"{where}.interval")
        if where == "speedup":
            stated = report.summary.speedup_interval
            interval_agrees(stated, sp, "summary.speedup_interval")


def _timeline(report: MicroReport) -> None:
    """``timeline.<arm>``: the lanes of the repeat it names, exactly."""
    for arm, tl in (report.timeline or {}).items():
        if tl is None or "repeat" not in tl.model_fields_set:
            continue
        recs = (report.repeats or {}).get(arm) or []
        rec = next((r for r in recs if r.iteration == tl.repeat), None)
        if rec is not None and "timeline" in rec.model_fields_set and rec.timeline != tl.ranks:
            raise Disagreement(
                f"timeline.{arm} disagrees with repeats.{arm} (iteration {tl.repeat!r}) "
                f"timeline: {DERIVED}"
            )


def figures_agree(report: MicroReport, d: MicroDerived) -> None:
    """Every figure the summary states against the one its raw records give (``FIGURES``;
    an absent figure: nothing to check)."""
    stated = report.summary.model_dump(exclude_unset=True)
    for name, derived in stated_figures(d).items():
        given, where = stated.get(name), f"summary.{name}"
        if isinstance(derived, bool) or isinstance(given, bool):
            if derived is not None and given is not None and given is not derived:
                raise Disagreement(
                    f"{where} says {given!r} but the raw data gives {derived!r}: {EDITED}"
                )
            continue
        agree(given, derived, where)


def micro_disagreement(report: MicroReport) -> None:
    mraw = micro_raw_of(report)
    if mraw.floor_ms is not None and mraw.floor_ms <= 0 and mraw.repeats.get(mraw.change or ""):
        raise Disagreement(f"floor_ms must be > 0, got {mraw.floor_ms!r}")
    d = derive_micro(mraw)
    control = report.control.arms if report.control else {}
    for arm, figures in d.arms.items():
        body = report.arms[arm]  # there: its ledger was read (``micro_raw_of``)
        arm_block_agrees(body.total_ms, body.stages, figures, f"arms.{arm}", f"repeats.{arm}")
        if figures.moved_bytes is not None:
            agree(body.moved_bytes, figures.moved_bytes, f"arms.{arm}.moved_bytes")
        if arm in control and mraw.control.get(arm):
            ctl, at = arm_figures(mraw.control[arm], arm), f"control.arms.{arm}"
            c = control[arm]
            arm_block_agrees(c.total_ms, c.stages, ctl, at, f"control_repeats.{arm}")
    if not d.arms:
        return
    figures_agree(report, d)
    _ratios(report, mraw, d)
    _timeline(report)
