"""Recompute, never trust: every figure the gate and ``compare`` use is derived here from
the raw data a report carries (micro: the per-repeat records; serve-ab: the per-request
rows; parity: the per-input rows).

Before anything is derived, the report goes through the report model's checks
(``report.model.validate_report``: types, then every derived block and summary number
against the raw data, ``report.agree``), the one place a report is checked; a report that
fails them raises :class:`EvidenceError` naming the field (the CLI's exit 2: the file
cannot be trusted). Completeness comes from the evidence: a report is complete only when
every planned (arm, repeat) or (rate, arm, repeat) is present with its raw rows, nothing
errored, and (for reports that carry the flag) the writer marked it final.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kimi_bench.infra.stats import Measurement, median
from kimi_bench.infra.stats.compare import Comparison, compare, ratio
from kimi_bench.infra.stats.launches import speedup_interval
from kimi_bench.report.model import Report, ReportError, validate_report
from kimi_bench.report.roles import baseline_arm, change_arm


class EvidenceError(ReportError):
    """A report whose summary disagrees with its raw data, or whose raw data is invalid."""


@dataclass
class Evidence:
    """What the raw data of one report shows."""

    kind: str
    complete: bool = True
    incomplete_why: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    measurements: dict[str, Measurement] = field(default_factory=dict)

    def missing(self, why: str) -> None:
        self.complete = False
        self.incomplete_why.append(why)


def where_of(report: Report) -> str:
    return str(report.source or f"{report.kind} report")


def checked(report: Report) -> None:
    """The report model's checks (types, derived blocks against raw data), as EvidenceError."""
    try:
        validate_report(report)
    except ReportError as exc:
        raise EvidenceError(str(exc)) from None


def throughput_comparison(a: list[float], b: list[float], seed: int) -> Comparison | None:
    """Throughput of arm B vs arm A (req/s per run), or None when a side has none."""
    if not a or not b:
        return None
    return compare(Measurement(a, "req/s"), Measurement(b, "req/s"), seed=seed)


# ------------------------------------------------------------------------------- micro


def _totals(report: Report, arm: str, block: str = "repeats") -> list[float]:
    reps = (report.data.get(block) or {}).get(arm)
    if not isinstance(reps, list):
        raise EvidenceError(f"{where_of(report)}: {block}.{arm} is missing: no raw data")
    return [float(r["total_ms"]) for r in reps]


def micro_evidence(report: Report) -> Evidence:
    """The micro figures from the per-repeat records (checked first: ``checked``)."""
    checked(report)
    w, cfg = where_of(report), report.config
    ev = Evidence("micro")
    arms = [str(a) for a in cfg.get("arms") or []]
    base, change = baseline_arm(cfg, arms), change_arm(cfg, arms)
    if base not in arms or len(arms) < 2:
        raise EvidenceError(f"{w}: config.arms {arms!r} must hold the baseline and another arm")
    planned = cfg.get("repeats")
    if isinstance(planned, int) and isinstance(cfg.get("launches"), int):
        planned *= max(1, cfg["launches"])  # every launch runs the repeats
    totals = {arm: _totals(report, arm) for arm in arms}
    exact = [
        r.get("bit_exact") is True
        for arm in arms
        if arm != base
        for r in report.data["repeats"][arm]
    ]
    for arm, xs in totals.items():
        if isinstance(planned, int) and len(xs) < planned:
            ev.missing(f"{arm}: {len(xs)} of {planned} repeats")
    n = min(len(v) for v in totals.values())
    ev.figures["bit_exact"] = bool(exact) and all(exact)
    ev.figures["repeats"] = n
    if change is not None and totals.get(change):
        if len(totals[change]) != len(totals[base]):
            raise EvidenceError(f"{w}: {base} and {change} have a different number of repeats")
        speed = ratio(Measurement(totals[base]), Measurement(totals[change]))
        ev.measurements["speedup"] = speed
        ev.figures["speedup"] = speed.median
        every = [int(r.get("launch", 0)) for r in report.data["repeats"][change]]
        launches = [every[int(str(i))] for i in speed.unit_ids or ()]  # the paired repeats
        ev.figures["speedup_interval"], _ = speedup_interval(speed.samples, launches)
        ev.figures["launches"] = len(set(launches))
        ev.figures["deferred_median_ms"] = median(totals[change])  # the change's (a name kept)
    _micro_bytes(report, ev, arms, base, change)
    _micro_floor(report, ev)
    _micro_control(report, ev, totals, base, change)
    stopped(report, ev)
    return ev


def _moved(report: Report, arm: str) -> float:
    block = (report.data.get("arms") or {}).get(arm) or {}
    return float(sum(r["bytes"] for r in block.get("copies") or [] if r.get("copies", True)))


def _micro_bytes(
    report: Report, ev: Evidence, arms: list[str], base: str, change: str | None
) -> None:
    moved = {arm: _moved(report, arm) for arm in arms}
    if change is not None and moved.get(change):
        ev.figures["bytes_ratio"] = moved[base] / moved[change]


def _micro_floor(report: Report, ev: Evidence) -> None:
    floor = report.data.get("floor_ms")  # older reports' floor block: see report.migrate
    if floor is not None and "deferred_median_ms" in ev.figures:
        ev.figures["floor_ratio"] = ev.figures["deferred_median_ms"] / float(floor)


def _micro_control(
    report: Report, ev: Evidence, totals: dict[str, list[float]], base: str, change: str | None
) -> None:
    """Each arm's payload cost (its median minus its control rounds' median) and the
    payload speedup of the change over the baseline."""
    raw = report.data.get("control_repeats")
    if not raw:
        return  # no control rounds (older reports, --control-repeats 0)
    payload: dict[str, float] = {}
    for arm, arm_totals in totals.items():
        ctl = _totals(report, arm, "control_repeats") if arm in raw else []
        if ctl and arm_totals:
            payload[arm] = median(arm_totals) - median(ctl)
            ev.figures[f"{arm.replace('-', '_')}_payload_ms"] = payload[arm]
    if change is not None and payload.get(change, 0) > 0 and payload.get(base, 0) > 0:
        ev.figures["payload_speedup"] = payload[base] / payload[change]


def stopped(report: Report, ev: Evidence) -> None:
    """The run's own account: an error, an INCOMPLETE verdict, or not marked final."""
    s = report.summary
    if s.get("error"):
        ev.missing(str(s["error"]))
    elif str(s.get("verdict") or "").upper().startswith("INCOMPLETE"):
        ev.missing(str(s["verdict"]))
    final = report.data.get("final")
    if final is not None and final is not True:
        ev.missing("the report was not marked final (the run did not reach its end)")
