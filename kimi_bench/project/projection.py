"""Projection to larger rank counts: one node while the ranks fit on it (one rank per GPU),
then whole nodes, ranks spread as torchrun places them (rank r on node r // ranks per node)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

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
class Projection:
    """Predicted rows for one calibration (one carrier)."""

    calibration: Calibration
    host: Host
    fitted: Fitted
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per stage and TOTAL
    skipped: list[str] = field(default_factory=list)
    skipped_ranks: list[int] = field(default_factory=list)  # the rank counts of ``skipped``


def project(cal: Calibration, host: Host, scale: Scale) -> Projection:
    """Predict every arm and stage at every point of the curve (and every link speed once
    the ranks span nodes). The shm carrier stays on one node: off one node the runtime
    pickles tensors inline, so multi-node points of an shm calibration are skipped."""
    scale.validate()
    fitted = fit(cal, host)
    proj = Projection(cal, host, fitted)
    for n in curve_points(cal.ranks, scale.ranks):
        topo = topology(n, scale.gpus_per_node)
        if topo.nodes > 1 and cal.uses_segments:
            proj.skipped.append(
                f"{cal.transport} at {n} ranks ({topo.nodes} nodes): shared memory does not cross "
                "nodes; the runtime pickles inline there (see the pickle projection)"
            )
            proj.skipped_ranks.append(n)
            continue
        for link in scale.link_gbps if topo.nodes > 1 else (None,):
            h = replace(host, link_gbps=link or scale.link_gbps[0])
            for name, arm in (cal.arms | cal.control).items():
                pred = predict_arm(arm, cal, topo, h, fitted)
                base = {
                    "transport": cal.transport,
                    "ranks": n,
                    "nodes": topo.nodes,
                    "ranks_per_node": topo.ranks_per_node,
                    "gpus_per_node": topo.gpus_per_node,
                    "threads_per_process": topo.threads(host.cores),
                    "link_gbps": link,
                    "arm": name,
                }
                for s, p in pred.stages.items():
                    proj.rows.append(base | {"stage": s, "kind": p.kind, "predicted_ms": p.ms})
                proj.rows.append(
                    base | {"stage": "TOTAL", "kind": "-", "predicted_ms": pred.total_ms}
                )
    return proj


def totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (carrier, link, ranks): each arm's predicted total and the speedup
    (first arm over each other arm; eager / deferred for micro's two arms)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        if r["stage"] != "TOTAL":
            continue
        key = (r["transport"], r["link_gbps"], r["ranks"])
        row = out.setdefault(
            key,
            {
                "transport": r["transport"],
                "ranks": r["ranks"],
                "nodes": r["nodes"],
                "link_gbps": r["link_gbps"],
            },
        )
        row[f"{r['arm']}_ms"] = r["predicted_ms"]
        if "low_ms" in r and not r["arm"].endswith(CONTROL_SUFFIX):
            row[f"{r['arm']}_interval_ms"] = f"{r['low_ms']:.4g}..{r['high_ms']:.4g}"
    for row in out.values():
        e, d = row.get("eager_ms"), row.get("deferred_ms")
        row["speedup"] = e / d if e and d else None
        _payload_columns(row)
    return sorted(out.values(), key=lambda r: (r["transport"], r["ranks"], r["link_gbps"] or 0))


def _payload_columns(row: dict[str, Any]) -> None:
    """Each arm's payload cost (its total minus its control plane) and the deferred
    speedup on payload cost, where the calibration had control rounds."""
    for key in [k for k in row if k.endswith(f"{CONTROL_SUFFIX}_ms")]:
        arm = key.removesuffix(f"{CONTROL_SUFFIX}_ms")
        total, control = row.get(f"{arm}_ms"), row[key]
        if total is not None and control is not None:
            row[f"{arm}_payload_ms"] = total - control
    e, d = row.get("eager_payload_ms"), row.get("deferred_payload_ms")
    if e is not None and d is not None:
        row["payload_speedup"] = e / d if d > 0 else None
