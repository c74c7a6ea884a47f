"""Prediction error against measured micro reports: calibrate at one rank count, predict
another on the same host, compare stage by stage and in total."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from kimi_bench.project.calibration import CONTROL_SUFFIX, Calibration, ProjectionError
from kimi_bench.project.model import ArmPrediction, Fitted, Host, Topology, predict_arm

TARGET_PCT = 20.0  # the bar for total-time error
SMALL_SHARE = 0.02  # stages under 2% of the measured total: relative error is not meaningful


@dataclass(frozen=True)
class ErrorRecord:
    """One row of the validation's error table (``validation.stages``; its TOTAL rows with
    ``within_target`` are ``validation.totals``)."""

    transport: str
    ranks: int
    arm: str
    stage: str  # "TOTAL" for the arm's total
    kind: str
    calibration_ms: float | None
    predicted_ms: float | None
    measured_ms: float | None
    share_of_total: float | None = None  # a stage's share of the measured total
    within_target: bool | None = None  # TOTAL rows of ``total_errors`` only

    @property
    def error_ms(self) -> float | None:
        if self.predicted_ms is None or self.measured_ms is None:
            return None
        return self.predicted_ms - self.measured_ms

    @property
    def error_pct(self) -> float | None:
        err = self.error_ms
        if err is None or not self.measured_ms:
            return None
        return 100.0 * err / self.measured_ms

    @property
    def note(self) -> str | None:
        small = self.share_of_total is not None and self.share_of_total < SMALL_SHARE
        return f"small (< {SMALL_SHARE:.0%} of the total)" if small else None

    def as_dict(self) -> dict[str, object]:
        """The JSON row (``within_target`` only on the totals)."""
        out = asdict(self)
        share, within = out.pop("share_of_total"), out.pop("within_target")
        out |= {"error_ms": self.error_ms, "error_pct": self.error_pct}
        out |= {"share_of_total": share, "note": self.note}
        return out if within is None else out | {"within_target": within}


def same_host_topology(cal: Calibration, ranks: int, nodes: int = 1) -> Topology:
    """How micro ran ``ranks`` ranks on hosts like the calibration's: ``nodes`` nodes
    (one unless the measured report says otherwise), each node's GPUs shared."""
    return Topology(ranks, math.ceil(ranks / max(1, nodes)), cal.gpus)


def check_comparable(cal: Calibration, measured: Calibration) -> None:
    """A measured report can check a calibration only if it ran the same input on the same
    kind of host with the same carrier."""
    if measured.transport != cal.transport:
        raise ProjectionError(
            f"{measured.source} used the {measured.transport} carrier, the calibration "
            f"{cal.source} {cal.transport}"
        )
    if measured.image_areas != cal.image_areas:
        raise ProjectionError(
            f"{measured.source} measured a different input than the calibration {cal.source}"
        )
    if measured.device != cal.device or measured.gpus != cal.gpus:
        raise ProjectionError(
            f"{measured.source} ran on {measured.device} with {measured.gpus} GPU(s), the "
            f"calibration on {cal.device} with {cal.gpus}: not the same host"
        )


def error_rows(
    pred: ArmPrediction, calibration_total_ms: float, measured: Calibration, transport: str
) -> list[ErrorRecord]:
    """Per stage (with its share of the measured total) and TOTAL."""
    arm = measured.arm(pred.arm)
    at = (transport, pred.topology.ranks, pred.arm)
    total = arm.total_ms
    rows = []
    for s, p in pred.stages.items():
        got = arm.stage_ms(s)
        share = got / total if total and got is not None else None
        rows.append(ErrorRecord(*at, s, p.kind, p.measured_ms, p.ms, got, share))
    total_row = ErrorRecord(*at, "TOTAL", "-", calibration_total_ms, pred.total_ms, total)
    return [*rows, total_row]


def validate(
    cal: Calibration, fitted: Fitted, host: Host, measured: list[Calibration]
) -> list[ErrorRecord]:
    """Error table rows for every arm of every measured report."""
    out: list[ErrorRecord] = []
    for m in sorted(measured, key=lambda c: c.ranks):
        check_comparable(cal, m)
        topo = same_host_topology(cal, m.ranks, m.nodes)
        for name, arm in (cal.arms | cal.control).items():
            if name not in m.arms and name not in m.control:
                continue
            pred = predict_arm(arm, cal, topo, host, fitted)
            out += error_rows(pred, arm.total_ms, m, cal.transport)
    return out


def total_errors(rows: list[ErrorRecord]) -> list[ErrorRecord]:
    """The TOTAL rows of the arms (not their control planes, reported apart), each with
    ``within_target`` (|error| <= TARGET_PCT)."""
    return [
        replace(r, within_target=abs(r.error_pct) <= TARGET_PCT)
        for r in rows
        if r.stage == "TOTAL" and r.error_pct is not None and not r.arm.endswith(CONTROL_SUFFIX)
    ]


def biggest_misses(
    rows: list[ErrorRecord], transport: str, ranks: int, arm: str, n: int = 3
) -> list[ErrorRecord]:
    """The stages that contribute most (absolute ms) to one arm's total error."""
    stages = [
        r
        for r in rows
        if (r.transport, r.ranks, r.arm) == (transport, ranks, arm)
        and r.stage != "TOTAL"
        and r.error_ms is not None
    ]
    return sorted(stages, key=lambda r: -abs(r.error_ms or 0.0))[:n]
