"""Recompute, never trust: every figure the gate and ``compare`` use is derived here from
the raw data a report carries (micro: the per-repeat records; serve-ab: the per-request
rows; parity: the per-input rows), and the report's own summary is checked against it.

A report whose summary disagrees with its raw data, whose times, bytes or counts are
negative or not finite, or whose raw blocks are missing raises :class:`EvidenceError`
naming the field (the CLI's exit 2: the file cannot be trusted). Completeness comes from
the evidence too: a report is complete only when every planned (arm, repeat) or (rate,
arm, repeat) is present with its raw rows, nothing errored, and (for reports that carry
the flag) the writer marked it final.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kimi_bench.infra.stats import Measurement, median
from kimi_bench.infra.stats.compare import Comparison, compare, ratio
from kimi_bench.report.model import Report, ReportError

REL_TOL = 1e-6  # summaries are computed from the same floats: only rounding may differ


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


def number(value: Any, where: str, *, minimum: float | None = 0.0) -> float:
    """A finite number (>= ``minimum``), else EvidenceError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EvidenceError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise EvidenceError(f"{where} is not finite ({value!r})")
    if minimum is not None and value < minimum:
        raise EvidenceError(f"{where} is negative ({value!r}): times, bytes and counts are >= 0")
    return float(value)


def agree(stated: Any, derived: float | None, where: str) -> None:
    """The summary's ``stated`` value must equal the value ``derived`` from raw data."""
    if stated is None:
        return  # the summary does not state it (an older layout): nothing to disagree with
    if derived is None:
        raise EvidenceError(
            f"{where} says {stated!r} but the raw data gives {derived!r}: the summary "
            "disagrees with its raw data (an edited or inconsistent report)"
        )
    s = number(stated, where, minimum=None)
    if not math.isclose(s, derived, rel_tol=REL_TOL, abs_tol=1e-9):
        raise EvidenceError(
            f"{where} says {s:.6g} but the raw data gives {derived:.6g}: the summary "
            "disagrees with its raw data (an edited or inconsistent report)"
        )


def throughput_comparison(a: list[float], b: list[float], seed: int) -> Comparison | None:
    """Throughput of arm B vs arm A (req/s per run), or None when a side has none."""
    if not a or not b:
        return None
    return compare(Measurement(a, "req/s"), Measurement(b, "req/s"), seed=seed)


def agree_flag(stated: Any, derived: bool, where: str) -> None:
    if stated is not None and stated is not derived:
        raise EvidenceError(
            f"{where} says {stated!r} but the raw data gives {derived!r}: the summary "
            "disagrees with its raw data (an edited or inconsistent report)"
        )


def as_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise EvidenceError(f"{where} is missing or not a list: no raw data to check")
    return value


# ------------------------------------------------------------------------------- micro


def _micro_repeats(
    report: Report, arm: str, w: str, block: str = "repeats"
) -> list[dict[str, Any]]:
    reps = as_list((report.data.get(block) or {}).get(arm), f"{w}: {block}.{arm}")
    for i, rep in enumerate(reps):
        at = f"{w}: {block}.{arm}[{i}]"
        if not isinstance(rep, dict):
            raise EvidenceError(f"{at} is not an object")
        total = number(rep.get("total_ms"), f"{at}.total_ms")
        stages = rep.get("stage_ms")
        if not isinstance(stages, dict):
            raise EvidenceError(f"{at}.stage_ms is missing")
        parts = [number(v, f"{at}.stage_ms.{s}") for s, v in stages.items()]
        if not math.isclose(sum(parts), total, rel_tol=1e-6, abs_tol=1e-6):
            raise EvidenceError(
                f"{at}.total_ms {total:.6g} is not the sum of its stages ({sum(parts):.6g})"
            )
        for s, v in (rep.get("stage_bytes") or {}).items():
            number(v, f"{at}.stage_bytes.{s}")
    return reps


def _micro_samples(report: Report, arm: str, reps: list[dict[str, Any]], w: str) -> None:
    """``arms.<arm>`` samples must be exactly the repeats' numbers."""
    block = (report.data.get("arms") or {}).get(arm)
    if not isinstance(block, dict):
        raise EvidenceError(f"{w}: arms.{arm} is missing")
    totals = as_list((block.get("total_ms") or {}).get("samples"), f"{w}: arms.{arm}.total_ms")
    want = [r["total_ms"] for r in reps]
    if len(totals) != len(want) or any(
        not math.isclose(number(a, f"{w}: arms.{arm}.total_ms.samples"), b, rel_tol=REL_TOL)
        for a, b in zip(totals, want, strict=False)
    ):
        raise EvidenceError(
            f"{w}: arms.{arm}.total_ms.samples disagree with repeats.{arm}[*].total_ms"
        )
    stated = (block.get("total_ms") or {}).get("median")
    agree(stated, median(want) if want else None, f"{w}: arms.{arm}.total_ms.median")


def micro_evidence(report: Report) -> Evidence:
    w, cfg, s = where_of(report), report.config, report.summary
    ev = Evidence("micro")
    arms = [str(a) for a in cfg.get("arms") or []]
    if "eager" not in arms or len(arms) < 2:
        raise EvidenceError(f"{w}: config.arms {arms!r} must hold eager and another arm")
    planned = cfg.get("repeats")
    totals: dict[str, list[float]] = {}
    exact: list[bool] = []
    for arm in arms:
        reps = _micro_repeats(report, arm, w)
        _micro_samples(report, arm, reps, w)
        totals[arm] = [r["total_ms"] for r in reps]
        if arm != "eager":
            exact += [r.get("bit_exact") is True for r in reps]
        if isinstance(planned, int) and len(reps) < planned:
            ev.missing(f"{arm}: {len(reps)} of {planned} repeats")
        agree(s.get(f"{arm.replace('-', '_')}_median_ms"), median(totals[arm]) if reps else None,
              f"{w}: summary.{arm.replace('-', '_')}_median_ms")  # fmt: skip
    n = min(len(v) for v in totals.values())
    agree(s.get("repeats_completed"), float(n), f"{w}: summary.repeats_completed")
    agree_flag(s.get("bit_exact_all_repeats"), bool(exact) and all(exact),
          f"{w}: summary.bit_exact_all_repeats")  # fmt: skip
    ev.figures["bit_exact"] = bool(exact) and all(exact)
    ev.figures["repeats"] = n
    if (
        "deferred" in totals
        and totals["deferred"]
        and len(totals["deferred"]) == len(totals["eager"])
    ):
        speed = ratio(Measurement(totals["eager"]), Measurement(totals["deferred"]))
        ev.measurements["speedup"] = speed
        ev.figures["speedup"] = speed.median
        agree(s.get("speedup_median"), speed.median, f"{w}: summary.speedup_median")
        ev.figures["deferred_median_ms"] = median(totals["deferred"])
    elif "deferred" in totals:
        raise EvidenceError(f"{w}: eager and deferred have a different number of repeats")
    _micro_bytes(report, ev, arms, w)
    _micro_floor(report, ev, w)
    _micro_control(report, ev, totals, w)
    stopped(report, ev)
    return ev


def _micro_bytes(report: Report, ev: Evidence, arms: list[str], w: str) -> None:
    moved = {}
    for arm in arms:
        block = (report.data.get("arms") or {}).get(arm) or {}
        copies = as_list(block.get("copies"), f"{w}: arms.{arm}.copies")
        derived = 0.0
        for i, row in enumerate(copies):
            b = number(row.get("bytes"), f"{w}: arms.{arm}.copies[{i}].bytes")
            number(row.get("count", 0), f"{w}: arms.{arm}.copies[{i}].count")
            if row.get("copies", True):  # ledger rows that move bytes (not views or maps)
                derived += b
        stated = block.get("moved_bytes")
        agree(stated, derived, f"{w}: arms.{arm}.moved_bytes")
        moved[arm] = derived
        key = f"{arm.replace('-', '_')}_moved_bytes"
        agree(report.summary.get(key), derived, f"{w}: summary.{key}")
    if moved.get("deferred"):
        ev.figures["bytes_ratio"] = moved["eager"] / moved["deferred"]
        agree(report.summary.get("bytes_ratio"), ev.figures["bytes_ratio"],
              f"{w}: summary.bytes_ratio")  # fmt: skip


def _micro_floor(report: Report, ev: Evidence, w: str) -> None:
    floor = report.data.get("floor_ms")  # older reports' floor block: see report.migrate
    if floor is None or "deferred_median_ms" not in ev.figures:
        return
    f = number(floor, f"{w}: floor_ms")
    if f <= 0:
        raise EvidenceError(f"{w}: floor_ms must be > 0, got {f!r}")
    agree(report.summary.get("floor_ms"), f, f"{w}: summary.floor_ms")
    ev.figures["floor_ratio"] = ev.figures["deferred_median_ms"] / f
    agree(report.summary.get("deferred_over_floor"), ev.figures["floor_ratio"],
          f"{w}: summary.deferred_over_floor")  # fmt: skip


def _micro_control(report: Report, ev: Evidence, totals: dict[str, list[float]], w: str) -> None:
    """The control rounds (``control_repeats``, raw like ``repeats``) against the summary:
    each arm's control median and payload cost (its median minus the control's)."""
    raw = report.data.get("control_repeats")
    if not raw:
        return  # no control rounds (older reports, --control-repeats 0)
    payload: dict[str, float] = {}
    for arm, arm_totals in totals.items():
        reps = _micro_repeats(report, arm, w, "control_repeats")
        if not reps or not arm_totals:
            continue
        key = arm.replace("-", "_")
        ctl = median([r["total_ms"] for r in reps])
        agree(report.summary.get(f"{key}_control_ms"), ctl, f"{w}: summary.{key}_control_ms")
        payload[arm] = median(arm_totals) - ctl
        agree(report.summary.get(f"{key}_payload_ms"), payload[arm],
              f"{w}: summary.{key}_payload_ms")  # fmt: skip
        ev.figures[f"{key}_payload_ms"] = payload[arm]
    for arm, base in [(a, b) for a in payload for b in ("eager", "deferred") if b in payload]:
        if arm == base or (arm, base) == ("eager", "deferred"):
            continue
        key = f"payload_speedup_{arm}_vs_{base}".replace("-", "_")
        both = payload[arm] > 0 and payload[base] > 0
        agree(report.summary.get(key), payload[base] / payload[arm] if both else None,
              f"{w}: summary.{key}")  # fmt: skip
    if payload.get("deferred", 0) > 0 and payload.get("eager", 0) > 0:
        ev.figures["payload_speedup"] = payload["eager"] / payload["deferred"]


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
