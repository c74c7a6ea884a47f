"""What ``micro`` hands from module to module, typed: each repeat's record (raw: what the
processes measured), and the blocks the report is written from (derived once, from those
records: ``micro_report``, ``micro_control``, ``micro_decode``). They are the report's JSON
as it is written (``data.repeats``, ``data.arms``, ``data.control``, ``data.floor``), so
the writer needs no conversion; the report model checks them against each other when a
report is read (``report/agree.py``)."""

from __future__ import annotations

from typing import Any, TypedDict

from kimi_bench.engine.micro_messages import DecisionDoc, Floor, LedgerRow
from kimi_bench.infra.stats import IntervalDoc, MedianDoc
from kimi_bench.infra.stats.launches import SpreadDoc

__all__ = ["DecisionDoc", "Floor", "LedgerRow"]

# a Measurement's or an Interval's as_dict(): a JSON block whose shape its own class
# defines (``infra.stats``)
MeasurementBlock = dict[str, Any]


class TimelineSpan(TypedDict):
    """One stage of one lane: ms from the repeat's start, on one clock."""

    stage: str
    start_ms: float
    end_ms: float


class TimelineLane(TypedDict, total=False):
    """One lane of a repeat's timeline: the producer's (``lane``) or a rank's (``rank``)."""

    lane: str
    rank: int
    spans: list[TimelineSpan]


class Repeat(TypedDict, total=False):
    """One arm's repeat (or control round): the stages on the critical path, the merged
    copy ledger, the bit-exactness flags and what the processes reported about it."""

    iteration: int  # unique in the run: numbered on from the earlier launches' repeats
    launch: int  # the process launch (0-based) the repeat ran in
    timeline: list[TimelineLane]
    stage_ms: dict[str, float]
    stage_bytes: dict[str, int]
    total_ms: float
    copies: list[LedgerRow]
    decisions: list[DecisionDoc] | None
    bit_exact: bool | None
    bit_exact_fp32: bool | None
    owner_decode_ms: float
    recipe: dict[str, list[str]]  # taken off the records into data.recipe
    decodes: list[tuple[str, str]]  # taken off the records into data.decodes


Samples = dict[str, list[Repeat]]  # arm -> its repeats (or control rounds), in order


class Ratio(TypedDict, total=False):
    """A speedup: a paired ratio's ``Measurement.as_dict()`` and its interval
    (``data.speedups.<arm>_vs_<base>``), or a payload-cost ratio (``control``)."""

    label: str
    unit: str
    samples: list[float]
    unit_ids: list[Any]
    n: int
    n_units: int
    median: float | None
    mean: float
    p10: float
    p25: float
    p75: float
    p90: float
    iqr: float
    min: float
    max: float
    noise: float
    warnings: list[str]
    interval: IntervalDoc
    spread: SpreadDoc  # total speedups: between-launch and within-launch parts of the spread
    base_payload_ms: float
    arm_payload_ms: float
    reason: str


class DecodeBlock(TypedDict):
    """``data.deferred_decode``: what the arm whose inputs travel encoded saves against
    every other arm but the baseline, and what its owners' decode costs."""

    arm: str
    label: str
    encoded_images: int
    images: int
    routed: list[str]
    carried_bytes: int
    moved_bytes: int
    owner_decode_ms: MedianDoc
    versus: dict[str, dict[str, Any]]


class StageBlock(TypedDict):
    bytes: int
    samples_ms: list[float]
    summary_ms: MeasurementBlock | None


class ArmBlock(TypedDict):
    """``data.arms.<arm>`` (and ``data.control.arms.<arm>``)."""

    stages: dict[str, StageBlock]
    total_ms: MeasurementBlock | None
    copies: list[LedgerRow]
    copy_totals: dict[str, int]
    ledger_changed_in_repeats: list[int]
    h2d_bytes: int | None
    moved_bytes: int | None


class StageRow(TypedDict):
    arm: str
    stage: str
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    bytes: int | None


class Cost(TypedDict):
    arm_ms: float
    control_ms: float
    payload_ms: float
    interval: IntervalDoc


class PayloadBlock(TypedDict):
    stages: dict[str, Cost]
    total: Cost
    total_without_emulation: Cost


class ControlRow(TypedDict):
    """One row of the control table (per arm and stage: the payload cost)."""

    arm: str
    stage: str
    arm_ms: float
    control_ms: float
    payload_ms: float
    payload_low_ms: float | None
    payload_high_ms: float | None
    interval: str
    emulation: str


class ApartStage(TypedDict, total=False):
    """A stage whose cost here is the emulation's (``emulation_only``) or a stand-in's."""

    stage: str
    kind: str
    why: str
    arms: list[str]
    control_ms: dict[str, float | None]
    arm_ms: dict[str, float | None]


class ControlFloor(TypedDict):
    """``data.control.floor``: the control + data floor (the cheapest arm's control plane
    plus the data floor; ``floor_ms`` None without a data floor)."""

    data_floor_ms: float | None
    control_ms: float
    control_arm: str
    floor_ms: float | None
    made_of: str


class ControlSection(TypedDict):
    """``data.control``."""

    payload_images: str
    rounds: int
    arms: dict[str, ArmBlock]
    payload: dict[str, PayloadBlock]
    payload_speedups: dict[str, Ratio]
    emulation_only: list[ApartStage]
    floor: ControlFloor
    rows: list[ControlRow]


class MedianTimeline(TypedDict):
    """``data.timeline.<arm>``: the per-lane timeline of the median repeat."""

    repeat: int
    ranks: list[TimelineLane]
