"""What ``micro``'s processes send each other and the harness, typed: the producer's marks
after each request, each rank's marks after an arm's repeat (gathered to rank 0), rank 0's
message per repeat, and the floor; ``rank_marks`` makes a rank's marks from its step.
``bench.micro_build`` turns them into the report's repeat records
(``bench/micro_records.py``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, TypedDict, cast

import torch

from kimi_bench.domain.ledger import CopyRow
from kimi_bench.domain.policy import Decision
from kimi_bench.pipeline.arena_layout import ArenaSetup

if TYPE_CHECKING:
    from kimi_bench.pipeline.recipe import RankResult
    from kimi_bench.pipeline.step import Step

# one copy-ledger row (``domain.ledger.Ledger.rows``)
LedgerRow = CopyRow


class DecisionDoc(TypedDict):
    """One image's deferral decision as it travels (``dataclasses.asdict`` of
    ``domain.policy.Decision``)."""

    defer: bool
    reason: str
    raw_bytes: int
    processed_bytes: int
    encoded: bool


def decision_doc(d: Decision) -> DecisionDoc:
    """``d`` as it travels and as reports keep it: every field of ``Decision``, in order
    (``DecisionDoc`` names them; a test holds the two together)."""
    return cast("DecisionDoc", asdict(d))


class ProducerMarks(TypedDict):
    """What the producer sends after each request: its stage marks (perf_counter), its copy
    ledger, its decisions, the recipe steps it ran and which decoder each input got."""

    marks: dict[str, float]
    ledger: list[LedgerRow]
    decisions: list[DecisionDoc]
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


def rank_marks(
    step: Step,
    res: RankResult,
    producer: ProducerMarks | None,
    offset: float,
    reference: dict[str, torch.Tensor | None],
) -> RankMarks:
    """A rank's marks after an arm's repeat, moved by ``offset`` onto rank 0's clock. The
    baseline arm's owner outputs (BF16, FP32 and, with a device group, the gathered
    encoder input) become ``reference``; every other arm's are held against them."""
    out, encoded = res.out, res.gathered  # encoded None: a metadata-only gather
    fp32 = out.batch.pixel_values if out.batch is not None else None
    baseline = step.arm.role == "baseline"
    if baseline:
        reference.update(bf16=out.tower, fp32=fp32, encoded=encoded)
    return RankMarks(
        marks={k: t + offset for k, t in step.hook.marks.items()},  # type: ignore[attr-defined]
        ledger=step.ledger.rows(),
        producer=producer,
        recipe=step.trail,
        decodes=step.decodes,
        owner_decode_ms=out.decode_ms,  # deferred-decode: inside owner_h2d
        bit_exact=None
        if baseline
        else _same(out.tower, reference.get("bf16")) and _same(encoded, reference.get("encoded")),
        bit_exact_fp32=None if baseline else _same(fp32, reference.get("fp32")),
    )


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """``torch.equal`` on the owner's output (both absent on a rank that owns nothing)."""
    if a is None or b is None:
        return a is None and b is None
    return bool(torch.equal(a, b))


class RepeatMessage(TypedDict):
    """Rank 0's message per arm and round (``repeat``): every rank's marks."""

    iteration: int
    arm: str
    ranks: list[RankMarks]
    control: bool


class Floor(TypedDict, total=False):
    """``data.floor``: the work no arm can avoid (``engine.floor.measure_floor``)."""

    raw_bytes: int
    pinned_h2d_ms: float | None
    pinned_h2d_gbps: float | None
    h2d_ms: float
    materialize_ms: float
    floor_ms: float
    made_of: str
    zero_copy_setup: list[ArenaSetup | None]  # per rank
