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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import ValidationError

from kimi_bench.options import Carrier
from kimi_bench.report.envelope import Environment, RunConfig
from kimi_bench.report.kinds import ControlRepeat, CopyRow, MicroArm, MicroReport, StageBlock
from kimi_bench.report.model import Report
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
    environment: dict[str, Any] = field(default_factory=dict)  # as the report wrote it
    env: Environment = field(default_factory=Environment)  # ... typed
    # the control plane: each arm's rounds on a minimal payload, as "<arm>:control"
    control: dict[str, ArmCal] = field(default_factory=dict)

    def arm(self, name: str) -> ArmCal:
        return self.arms[name] if name in self.arms else self.control[name]


CONTROL_SUFFIX = ":control"


def _control(repeats: dict[str, list[ControlRepeat]]) -> dict[str, ArmCal]:
    """Each arm's control rounds (micro's ``control_repeats``: stage and total ms per
    round). Their bytes are a few KB, so every stage reads as moving none."""
    out: dict[str, ArmCal] = {}
    for arm, rounds in repeats.items():
        total = _median([r.total_ms for r in rounds])
        if total is None:
            continue
        names = [s for r in rounds for s in r.stage_ms]
        stages = {
            s: StageCal(s, _median([r.stage_ms.get(s) for r in rounds]), 0)
            for s in dict.fromkeys(names)
        }
        name = f"{arm}{CONTROL_SUFFIX}"
        out[name] = ArmCal(name, stages, total)
    return out


def _median(values: Sequence[object]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, (int, float))]
    return statistics.median(nums) if nums else None


def stage_view(stage: StageBlock) -> tuple[float | None, int]:
    """(median ms or None when the stage did not run, bytes) of one stage entry."""
    nbytes = stage.bytes or 0
    if stage.applicable is False:
        return None, nbytes
    med = stage.summary_ms.median if stage.summary_ms else None
    if med is None:
        med = _median(stage.samples_ms)
    return med, nbytes


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


def _ledger_ops(rows: list[CopyRow]) -> dict[str, dict[str, tuple[int, int]]]:
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for r in rows:
        if r.stage is None or r.op is None:
            continue
        moved = (r.bytes or 0) if r.copies is not False else 0
        ops = out.setdefault(r.stage, {})
        b, c = ops.get(r.op, (0, 0))
        ops[r.op] = (b + moved, c + (r.count or 1))
    return out


def _image_areas(config: RunConfig) -> tuple[int, ...]:
    areas: list[int] = []
    for g in config.groups or []:
        try:
            count, width, height = (int(x) for x in g)
        except (TypeError, ValueError):
            continue
        areas += [width * height] * count
    return tuple(areas)


def _nodes(config: RunConfig) -> int:
    for v in (config.nodes, config.nnodes):
        if v is not None and v >= 1:
            return v
    return 1


def _arm(name: str, arm: MicroArm, serialize_op: str, ranks: int) -> ArmCal:
    if not arm.stages:
        raise ProjectionError(f"arm {name!r} has no stages")
    ledger_ops = _ledger_ops(arm.copies) if arm.copies is not None else None
    stages: dict[str, StageCal] = {}
    for s, st in arm.stages.items():
        ms, nbytes = stage_view(st)
        if ledger_ops is not None:
            ops = ledger_ops.get(s, {})
        else:
            ops = _inferred_ops(s, serialize_op, nbytes, ranks)
        stages[s] = StageCal(s, ms, nbytes, ops)
    total = arm.total_ms.median
    if total is None:
        raise ProjectionError(f"arm {name!r} has no total_ms.median")
    return ArmCal(name, stages, total)


def read_calibration(report: Report, source: str = "") -> Calibration:
    """Reduce a micro report to a :class:`Calibration`; ProjectionError says what is missing."""
    where = source or "report"
    if report.kind != "micro":
        raise ProjectionError(f"{where} is a {report.kind!r} report; the projection needs micro")
    if not report.data.get("arms"):
        raise ProjectionError(f"{where} has no per-arm stage data (arms)")
    typed = report.typed(MicroReport)
    cfg, env = typed.config, typed.environment
    ranks, transport = cfg.ranks, str(cfg.transport)
    if not isinstance(ranks, int) or ranks < 1 or transport not in get_args(Carrier):
        raise ProjectionError(f"{where} does not say its ranks and transport (config)")
    try:
        traits = carrier_traits(report.config)
    except ValidationError as exc:
        raise ProjectionError(f"{where}: config.carrier_traits does not read: {exc}") from None
    try:
        arms = {a: _arm(a, arm, traits.serialize_op, ranks) for a, arm in typed.arms.items()}
    except ProjectionError as exc:
        raise ProjectionError(f"{where}: {exc}") from None
    gbps = typed.floor.pinned_h2d_gbps if typed.floor else None
    device = str(env.device or cfg.device or "cpu")
    return Calibration(
        source=source,
        ranks=ranks,
        transport=transport,
        uses_segments=traits.uses_segments,
        serialize_op=traits.serialize_op,
        device=device,
        nodes=_nodes(cfg),
        gpus=(env.gpu_count or 0) if device == "cuda" else 0,
        cores=env.cpu_count or None,
        h2d_gbps=gbps if gbps is not None and gbps > 0 else None,
        image_areas=_image_areas(cfg),
        arms=arms,
        ledger=any(arm.copies is not None for arm in typed.arms.values()),
        environment=dict(report.environment),
        env=env,
        control=_control(typed.control_repeats),
    )
