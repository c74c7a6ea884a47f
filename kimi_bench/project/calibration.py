"""What a ``micro`` report measured, in the shape the projection needs.

Everything the projection reads from a report goes through :func:`read_calibration`, so a
change of the micro report format is a fix in this one module. Two formats are read:

- stage medians and bytes under ``arms.<arm>.stages.<stage>`` (``summary_ms.median``, or the
  median of ``samples_ms``; ``applicable: false`` marks a stage that did not run), and
- when present, the copy ledger ``arms.<arm>.copies`` (rows with ``stage``, ``op``, ``bytes``,
  ``count``): then the operations of each stage come from it. Without a ledger they are
  inferred from the stage name and the carrier (which is what the older micro did).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, get_args

from kimi_bench.options import Carrier
from kimi_bench.report import Report
from kimi_bench.report.roles import carrier_traits


class ProjectionError(ValueError):
    """A report that cannot calibrate or check a projection; the message says why."""


@dataclass(frozen=True)
class StageCal:
    """One stage of one arm: median milliseconds (None: the stage did not run), the bytes
    it moved summed over every process, and the bytes per operation (``op -> bytes``)."""

    name: str
    ms: float | None
    bytes: int
    ops: dict[str, tuple[int, int]] = field(default_factory=dict)  # op -> (bytes, count)

    def op_bytes(self, *ops: str) -> int:
        return sum(self.ops[o][0] for o in ops if o in self.ops)


@dataclass(frozen=True)
class ArmCal:
    name: str
    stages: dict[str, StageCal]
    total_ms: float

    def stage_ms(self, name: str) -> float | None:
        st = self.stages.get(name)
        return st.ms if st else None


@dataclass(frozen=True)
class Calibration:
    """A micro report reduced to what the model uses."""

    source: str
    ranks: int
    transport: str
    # what the carrier does (``report.roles.carrier_traits``): shared-memory segments (one
    # node only) or features pickled inline; the producer's byte-moving ledger op
    uses_segments: bool
    serialize_op: str
    device: str
    nodes: int  # nodes the ranks ran on (config ``nodes``/``nnodes``; 1 when absent)
    gpus: int  # GPUs the ranks shared (round robin); 0 on a CPU run
    cores: int | None  # CPU cores of the host, when the report records them
    h2d_gbps: float | None  # pinned host->device bandwidth of one GPU link (the floor), GB/s
    image_areas: tuple[int, ...]  # width * height per image, in input order
    arms: dict[str, ArmCal]
    ledger: bool
    environment: dict[str, Any] = field(default_factory=dict)
    # the control plane: each arm's rounds on a minimal payload, as "<arm>:control"
    control: dict[str, ArmCal] = field(default_factory=dict)

    def arm(self, name: str) -> ArmCal:
        return self.arms[name] if name in self.arms else self.control[name]


CONTROL_SUFFIX = ":control"


def _control(raw: Any) -> dict[str, ArmCal]:
    """Each arm's control rounds (micro's ``control_repeats``: stage and total ms per
    round). Their bytes are a few KB, so every stage reads as moving none."""
    out: dict[str, ArmCal] = {}
    for arm, reps in (raw or {}).items() if isinstance(raw, dict) else ():
        rounds = [r for r in reps or [] if isinstance(r, dict)]
        total = _median([r.get("total_ms") for r in rounds])
        if total is None:
            continue
        names = [s for r in rounds for s in (r.get("stage_ms") or {})]
        stages = {
            s: StageCal(s, _median([(r.get("stage_ms") or {}).get(s) for r in rounds]), 0)
            for s in dict.fromkeys(names)
        }
        name = f"{arm}{CONTROL_SUFFIX}"
        out[name] = ArmCal(name, stages, total)
    return out


def _median(values: list[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, (int, float))]
    return statistics.median(nums) if nums else None


def stage_view(stage: dict[str, Any]) -> tuple[float | None, int]:
    """(median ms or None when the stage did not run, bytes) of one stage entry."""
    nbytes = int(stage.get("bytes") or 0)
    if stage.get("applicable") is False:
        return None, nbytes
    summary = stage.get("summary_ms") or {}
    med = summary.get("median")
    if not isinstance(med, (int, float)):
        med = _median(stage.get("samples_ms") or [])
    return (float(med) if med is not None else None), nbytes


# Operations of a stage when the report has no ledger (the older micro format).
def _inferred_ops(
    stage: str, serialize_op: str, nbytes: int, ranks: int
) -> dict[str, tuple[int, int]]:
    if not nbytes:
        return {}
    by_stage = {
        "d2h": "d2h",
        "serialize": serialize_op,
        "to_rank0": "ipc",
        "broadcast": "gloo_broadcast",
        "take_copy": "clone",
        "pre_embed_move": "h2d",
        "owner_h2d": "h2d",
    }
    op = by_stage.get(stage)
    if op is None:
        return {}
    return {op: (nbytes, max(1, ranks - 1) if op == "gloo_broadcast" else 1)}


def _ledger_ops(rows: list[dict[str, Any]]) -> dict[str, dict[str, tuple[int, int]]]:
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for r in rows:
        stage, op = r.get("stage"), r.get("op")
        if not isinstance(stage, str) or not isinstance(op, str):
            continue
        moved = int(r.get("bytes") or 0) if r.get("copies", True) else 0
        ops = out.setdefault(stage, {})
        b, c = ops.get(op, (0, 0))
        ops[op] = (b + moved, c + int(r.get("count") or 1))
    return out


def _image_areas(config: dict[str, Any]) -> tuple[int, ...]:
    areas: list[int] = []
    for g in config.get("groups") or []:
        try:
            count, width, height = (int(x) for x in g)
        except (TypeError, ValueError):
            continue
        areas += [width * height] * count
    return tuple(areas)


def _nodes(config: dict[str, Any]) -> int:
    for key in ("nodes", "nnodes"):
        v = config.get(key)
        if isinstance(v, int) and v >= 1:
            return v
    return 1


def _arm(name: str, raw: dict[str, Any], serialize_op: str, ranks: int) -> ArmCal:
    stages_raw = raw.get("stages")
    if not isinstance(stages_raw, dict) or not stages_raw:
        raise ProjectionError(f"arm {name!r} has no stages")
    ledger = raw.get("copies")
    ledger_ops = _ledger_ops(ledger) if isinstance(ledger, list) else None
    stages: dict[str, StageCal] = {}
    for s, st in stages_raw.items():
        ms, nbytes = stage_view(st if isinstance(st, dict) else {})
        if ledger_ops is not None:
            ops = ledger_ops.get(s, {})
        else:
            ops = _inferred_ops(s, serialize_op, nbytes, ranks)
        stages[s] = StageCal(s, ms, nbytes, ops)
    total = (raw.get("total_ms") or {}).get("median")
    if not isinstance(total, (int, float)):
        raise ProjectionError(f"arm {name!r} has no total_ms.median")
    return ArmCal(name, stages, float(total))


def read_calibration(report: Report, source: str = "") -> Calibration:
    """Reduce a micro report to a :class:`Calibration`; ProjectionError says what is missing."""
    where = source or "report"
    if report.kind != "micro":
        raise ProjectionError(f"{where} is a {report.kind!r} report; the projection needs micro")
    cfg, env = report.config, report.environment
    arms_raw = report.data.get("arms")
    if not isinstance(arms_raw, dict) or not arms_raw:
        raise ProjectionError(f"{where} has no per-arm stage data (arms)")
    ranks, transport = cfg.get("ranks"), str(cfg.get("transport"))
    if not isinstance(ranks, int) or ranks < 1 or transport not in get_args(Carrier):
        raise ProjectionError(f"{where} does not say its ranks and transport (config)")
    traits = carrier_traits(cfg)
    try:
        arms = {
            a: _arm(a, raw, str(traits["serialize_op"]), ranks)
            for a, raw in arms_raw.items()
            if isinstance(raw, dict)
        }
    except ProjectionError as exc:
        raise ProjectionError(f"{where}: {exc}") from None
    raw_arms = list(arms_raw.values())
    floor = report.data.get("floor") or {}
    gbps = floor.get("pinned_h2d_gbps")
    device = str(env.get("device") or cfg.get("device") or "cpu")
    cores = env.get("cpu_count")
    return Calibration(
        source=source,
        ranks=ranks,
        transport=transport,
        uses_segments=bool(traits["uses_segments"]),
        serialize_op=str(traits["serialize_op"]),
        device=device,
        nodes=_nodes(cfg),
        gpus=int(env.get("gpu_count") or 0) if device == "cuda" else 0,
        cores=int(cores) if isinstance(cores, int) and cores > 0 else None,
        h2d_gbps=float(gbps) if isinstance(gbps, (int, float)) and gbps > 0 else None,
        image_areas=_image_areas(cfg),
        arms=arms,
        ledger=any(isinstance(r, dict) and isinstance(r.get("copies"), list) for r in raw_arms),
        environment=dict(env),
        control=_control(report.data.get("control_repeats")),
    )
