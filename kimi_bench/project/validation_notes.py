"""What the validation says about the projection: the notes per miss (which stages, why),
the control plane's error apart, and how wide each projected total's interval is.

A stage the model cannot predict (its validation error was large at the rank counts that
were measured) makes every projection of it uncertain by as much: each projected total
gets an interval of +- the sum, over its stages, of the stage's projected ms times the
largest relative error that stage showed in validation (stages under 2% of a total, whose
relative error says little, and arms never validated add nothing)."""

from __future__ import annotations

from kimi_bench.project.calibration import CONTROL_SUFFIX
from kimi_bench.project.projection import ProjectedRow
from kimi_bench.project.validate import TARGET_PCT, ErrorRecord, biggest_misses, total_errors

_WHY = {
    ("tree", -1): "the broadcast grew by more than gloo's extra rounds account for. In "
    "the 2-rank calibration one receiver copies and unpickles the message alone; from 4 "
    "ranks on several receivers do it at the same time on the same host, sharing its cores "
    "and memory, and the slowest ends the stage. How much that costs cannot be seen at 2 "
    "ranks, so the model keeps the receive side at its 2-rank cost",
    ("fixed", -1): "single-process work ran slower with more rank processes on the host "
    "(shared cores and memory bandwidth); the model keeps it at its calibration cost",
    ("fixed", 1): "a stage hidden behind a slower rank on the critical path measures ~0 ms "
    "at more ranks; the model keeps its calibration cost",
    ("threaded", 1): "the stage grew less than its copies did in the host probe (or than "
    "thread_exponent says): work beside the copies got faster, or the copies overlapped",
    ("threaded", -1): "the stage grew more than its copies did in the host probe (or than "
    "thread_exponent says): the rest of the stage (segment creation, page faults, pickling) "
    "also slows with fewer threads or more processes",
    ("link", 1): "pageable copies of several processes overlap on the link better than the "
    "additive model assumes",
    ("link", -1): "pageable copies of several processes contend for host memory as well",
}


def _miss_notes(errors: list[ErrorRecord]) -> list[str]:
    notes = []
    for t in total_errors(errors):
        if t.within_target:
            continue
        worst = biggest_misses(errors, t.transport, t.ranks, t.arm)
        parts = ", ".join(f"{r.stage} ({r.kind}) {r.error_ms:+.1f} ms" for r in worst)
        top = worst[0] if worst else None
        why = _WHY.get((top.kind, 1 if (top.error_ms or 0) > 0 else -1)) if top else None
        notes.append(
            f"MISSED: {t.transport} {t.arm} at {t.ranks} ranks: predicted "
            f"{t.predicted_ms:.1f} ms vs measured {t.measured_ms:.1f} ms "
            f"({t.error_pct:+.1f}%, target +-{TARGET_PCT:.0f}%); largest stage misses: "
            f"{parts}" + (f". Why: {why}." if why else ".")
        )
    return notes


def _fixed_drift(errors: list[ErrorRecord]) -> str | None:
    """How far single-process (fixed) stages drifted from their calibration cost."""
    errs = sorted(
        r.error_pct
        for r in errors
        if r.kind == "fixed"
        and not r.note
        and r.error_pct is not None
        and not r.arm.endswith(CONTROL_SUFFIX)  # the control plane has its own note
    )
    if not errs:
        return None
    mid = errs[len(errs) // 2]
    return (
        f"fixed stages (not small) of the measured reports: median prediction error "
        f"{mid:+.1f}% (range {errs[0]:+.1f}% to {errs[-1]:+.1f}%); a negative error means the "
        "same single-process work took longer with more rank processes on the host, which "
        "the model does not include."
    )


def validation_notes(errors: list[ErrorRecord]) -> list[str]:
    tots = total_errors(errors)
    if not tots:
        return []
    ok = sum(1 for t in tots if t.within_target)
    worst = max(tots, key=lambda t: abs(t.error_pct or 0.0))
    lines = [
        f"validation: total error within +-{TARGET_PCT:.0f}% for {ok} of {len(tots)} "
        f"(carrier, ranks, arm) cases; worst {worst.error_pct:+.1f}% "
        f"({worst.transport} {worst.arm} at {worst.ranks} ranks). Per-stage errors "
        "of stages under 2% of the measured total are noted as small: their relative error "
        "says little (a stage hidden behind a slower rank measures ~0 ms)."
    ]
    drift = _fixed_drift(errors)
    widened = (
        "intervals: each projected total of a validated arm carries ARM_interval_ms: +- the "
        "sum over its stages of the stage's projected ms x the largest relative error that "
        "stage showed in this validation (stages under 2% of a total excluded), so stages the "
        "model could not predict widen every projection of them."
    )
    misses = _miss_notes(errors) + _control_note(errors)
    return lines + ([drift] if drift else []) + [widened] + misses


def _control_note(errors: list[ErrorRecord]) -> list[str]:
    """The control plane's prediction error, apart from the arms' target: it moves a few
    KB, so only its gloo rounds and gather scale in the model."""
    rows = [
        r
        for r in errors
        if r.stage == "TOTAL" and r.arm.endswith(CONTROL_SUFFIX) and r.error_pct is not None
    ]
    if not rows:
        return []
    cases = ", ".join(
        f"{r.transport} {r.arm.removesuffix(CONTROL_SUFFIX)} at {r.ranks}: "
        f"{r.predicted_ms:.1f} vs {r.measured_ms:.1f} ms ({r.error_pct:+.0f}%)"
        for r in rows
    )
    return [
        "control plane (each arm on a minimal payload; projected rows ARM:control, payload "
        "= ARM minus ARM:control): it moves a few KB, so in the model only its broadcast rounds "
        "and gather change with ranks; its latencies (process wake-ups, barriers) grow with "
        f"the processes on the host, which the model does not include. Predicted vs measured: "
        f"{cases}."
    ]


def stage_uncertainty(errors: list[ErrorRecord]) -> dict[tuple[str, str, str], float]:
    """(carrier, arm, stage) -> the largest relative error the validation measured."""
    out: dict[tuple[str, str, str], float] = {}
    for r in errors:
        if r.stage == "TOTAL" or r.error_pct is None or r.note:
            continue
        key = (r.transport, r.arm, r.stage)
        out[key] = max(out.get(key, 0.0), abs(r.error_pct) / 100.0)
    return out


def widen(rows: list[ProjectedRow], errors: list[ErrorRecord]) -> None:
    """Give every projected TOTAL row ``low_ms``/``high_ms`` (see the module doc)."""
    unc = stage_uncertainty(errors)
    if not unc:
        return
    width: dict[tuple[str, int, float | None, str], float] = {}
    for r in rows:
        if r.stage == "TOTAL" or r.predicted_ms is None:
            continue
        key = (r.transport, r.ranks, r.link_gbps, r.arm)
        u = unc.get((r.transport, r.arm, r.stage), 0.0)
        width[key] = width.get(key, 0.0) + abs(r.predicted_ms) * u
    for r in rows:
        key = (r.transport, r.ranks, r.link_gbps, r.arm)
        if r.stage == "TOTAL" and r.predicted_ms is not None and key in width:
            r.low_ms = max(0.0, r.predicted_ms - width[key])
            r.high_ms = r.predicted_ms + width[key]
