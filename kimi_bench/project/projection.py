"""Projection to larger rank counts: one node while the ranks fit on it (one rank per GPU),
then whole nodes, ranks spread as torchrun places them (rank r on node r // ranks per node)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partial

from kimi_bench.project.calibration import CONTROL_SUFFIX, Calibration
from kimi_bench.project.model import Fitted, Host, Topology, fit, predict_arm


@dataclass(frozen=True)
class Scale:
    """Where to project: rank counts, GPUs (= ranks) per node, inter-node link speeds."""

    ranks: tuple[int, ...]
    gpus_per_node: int = 8
    link_gbps: tuple[float, ...] = (100.0,)

    def validate(self) -> None:
        if not self.ranks or any(r < 1 for r in self.ranks):
            raise ValueError(f"--ranks needs positive rank counts, got {list(self.ranks)}")
        if self.gpus_per_node < 1:
            raise ValueError(f"--gpus-per-node must be >= 1, got {self.gpus_per_node}")
        if not self.link_gbps or any(g <= 0 for g in self.link_gbps):
            raise ValueError(f"--link-gbps needs positive speeds, got {list(self.link_gbps)}")


def curve_points(cal_ranks: int, requested: tuple[int, ...]) -> list[int]:
    """The calibration's rank count, the powers of two up to the largest request, and the
    requests themselves (sorted, unique): the x axis of the figure."""
    top = max((cal_ranks, *requested))
    pts = {cal_ranks, *requested}
    p = 1
    while p <= top:
        if p >= min(cal_ranks, *requested):
            pts.add(p)
        p *= 2
    return sorted(pts)


def topology(ranks: int, gpus_per_node: int) -> Topology:
    return Topology(ranks, min(ranks, gpus_per_node), gpus_per_node)


@dataclass
class ProjectedRow:
    """One projected stage of one arm (``stage`` TOTAL: the arm's total) at one point."""

    transport: str
    ranks: int
    nodes: int
    ranks_per_node: int
    gpus_per_node: int
    threads_per_process: int | None
    link_gbps: float | None
    arm: str
    stage: str
    kind: str
    predicted_ms: float | None
    low_ms: float | None = None  # TOTAL rows: the validation's interval (``widen``)
    high_ms: float | None = None

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        if self.low_ms is None:  # not widened: no interval columns
            del out["low_ms"], out["high_ms"]
        return out


@dataclass
class Projection:
    """Predicted rows for one calibration (one carrier)."""

    calibration: Calibration
    fitted: Fitted
    rows: list[ProjectedRow] = field(default_factory=list)  # one per stage and TOTAL
    skipped: list[str] = field(default_factory=list)


def project(cal: Calibration, host: Host, scale: Scale) -> Projection:
    """Predict every arm and stage at every point of the curve (and every link speed once
    the ranks span nodes). The shm carrier stays on one node: off one node the runtime
    pickles tensors inline, so multi-node points of an shm calibration are skipped."""
    scale.validate()
    fitted = fit(cal, host)
    proj = Projection(cal, fitted)
    for n in curve_points(cal.ranks, scale.ranks):
        t = topology(n, scale.gpus_per_node)
        if t.nodes > 1 and cal.uses_segments:
            proj.skipped.append(
                f"{cal.transport} at {n} ranks ({t.nodes} nodes): shared memory does not cross "
                "nodes; the runtime pickles inline there (see the pickle projection)"
            )
            continue
        at = partial(ProjectedRow, cal.transport, n, t.nodes, t.ranks_per_node, t.gpus_per_node)
        for link in scale.link_gbps if t.nodes > 1 else (None,):
            h = replace(host, link_gbps=link or scale.link_gbps[0])
            for name, arm in (cal.arms | cal.control).items():
                pred = predict_arm(arm, cal, t, h, fitted)
                row = partial(at, t.threads(host.cores), link, name)
                proj.rows += [row(s, p.kind, p.ms) for s, p in pred.stages.items()]
                proj.rows.append(row("TOTAL", "-", pred.total_ms))
    return proj


@dataclass
class Total:
    """One (carrier, link, ranks) point: each arm's predicted total (ms), the validated
    arms' intervals and the speedup (eager over deferred)."""

    transport: str
    ranks: int
    nodes: int
    link_gbps: float | None
    arm_ms: dict[str, float | None] = field(default_factory=dict)
    interval_ms: dict[str, str] = field(default_factory=dict)  # "low..high"

    @property
    def speedup(self) -> float | None:
        e, d = _eager_deferred(self.arm_ms)
        return e / d if e and d else None

    def as_dict(self) -> dict[str, object]:
        """The row of ``data.totals``: ``ARM_ms`` (with ``ARM_interval_ms``), ``speedup``,
        ``ARM_payload_ms`` and ``payload_speedup`` (deferred's on payload cost)."""
        out: dict[str, object] = {
            "transport": self.transport,
            "ranks": self.ranks,
            "nodes": self.nodes,
            "link_gbps": self.link_gbps,
        }
        for arm, ms in self.arm_ms.items():
            out[f"{arm}_ms"] = ms
            if arm in self.interval_ms:
                out[f"{arm}_interval_ms"] = self.interval_ms[arm]
        out["speedup"] = self.speedup
        payload = {}  # each arm's total minus its control plane's
        for arm, control in self.arm_ms.items():
            total = self.arm_ms.get(base := arm.removesuffix(CONTROL_SUFFIX))
            if base != arm and total is not None and control is not None:
                payload[base] = total - control
        out |= {f"{arm}_payload_ms": ms for arm, ms in payload.items()}
        e, d = _eager_deferred(payload)
        if e is not None and d is not None:
            out["payload_speedup"] = e / d if d > 0 else None
        return out


def _eager_deferred(ms: Mapping[str, float | None]) -> tuple[float | None, float | None]:
    """micro's two arms (the speedup is eager's time over deferred's)."""
    return ms.get("eager"), ms.get("deferred")


def totals(rows: list[ProjectedRow]) -> list[Total]:
    """One per (carrier, link, ranks), sorted by carrier, ranks and link."""
    out: dict[tuple[str, float | None, int], Total] = {}
    for r in rows:
        if r.stage != "TOTAL":
            continue
        key = (r.transport, r.link_gbps, r.ranks)
        row = out.setdefault(key, Total(r.transport, r.ranks, r.nodes, r.link_gbps))
        row.arm_ms[r.arm] = r.predicted_ms
        if r.low_ms is not None and r.high_ms is not None and not r.arm.endswith(CONTROL_SUFFIX):
            row.interval_ms[r.arm] = f"{r.low_ms:.4g}..{r.high_ms:.4g}"
    return sorted(out.values(), key=lambda t: (t.transport, t.ranks, t.link_gbps or 0))
