"""What ``micro``'s processes send each other and the harness, typed: the producer's marks
after each request, each rank's marks after an arm's repeat (gathered to rank 0), rank 0's
message per repeat, and the floor. ``bench.micro_build`` turns them into the report's
repeat records (``bench/micro_records.py``)."""

from __future__ import annotations

from typing import Any, TypedDict

from kimi_bench.domain.ledger import CopyRow
from kimi_bench.pipeline.arena_layout import ArenaSetup

# one copy-ledger row (``domain.ledger.Ledger.rows``)
LedgerRow = CopyRow


class ProducerMarks(TypedDict):
    """What the producer sends after each request: its stage marks (perf_counter), its copy
    ledger, its decisions, the recipe steps it ran and which decoder each input got."""

    marks: dict[str, float]
    ledger: list[LedgerRow]
    decisions: list[dict[str, Any]]
    recipe: list[str]
    decodes: list[tuple[str, str]]


class RankMarks(TypedDict):
    """What each rank gathers to rank 0 after an arm's repeat (``producer`` on rank 0)."""

    marks: dict[str, float]  # stage -> perf_counter, on rank 0's clock
    ledger: list[LedgerRow]
    producer: ProducerMarks | None
    recipe: list[str]
    decodes: list[tuple[str, str]]
    owner_decode_ms: float
    bit_exact: bool | None
    bit_exact_fp32: bool | None


class RepeatMessage(TypedDict):
    """Rank 0's message per arm and round (``repeat``): every rank's marks."""

    iteration: int
    arm: str
    ranks: list[RankMarks]
    control: bool


class Floor(TypedDict, total=False):
    """``data.floor``: the work no arm can avoid (``micro_worker.measure_floor``)."""

    raw_bytes: int
    pinned_h2d_ms: float | None
    pinned_h2d_gbps: float | None
    h2d_ms: float
    materialize_ms: float
    floor_ms: float
    made_of: str
    zero_copy_setup: list[ArenaSetup | None]  # per rank
