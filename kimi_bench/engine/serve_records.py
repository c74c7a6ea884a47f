"""What ``serve-ab``'s and ``kimi-bench serve``'s pipeline processes hand each other,
typed: a request's record as it travels (producer -> rank 0 -> the outbox's ``request``),
rank 0's batch broadcast each step, and a decode step's ``tokens`` message. They stay
plain dicts on the wire (TypedDicts), so their pickles, and the bytes the ledger counts
for them, are what the runtime's dict-shaped requests would cost."""

from __future__ import annotations

from typing import Any, Required, TypedDict

# per-request stages the emulator reports (seconds), in pipeline order, non-overlapping: the
# gaps between a record's stamps (the last one: its first token to the response)
STAGES = ("queue_wait", "decode", "producer", "to_scheduler", "sched_wait", "step", "respond")
STAMPS = ("t_sent", "t_start", "t_decoded", "t_produced", "t_recv", "t_step", "t_first")
# the facts of a record the emulator reports with each request
REPORTED = ("image_tokens", "patches", "feature_bytes", "deferred_images", "image_decisions",
            "producer_copied_bytes", "scheduler_copied_bytes", "batch_requests", "batch_id",
            "worker", "recipe", "decodes")  # fmt: skip


class PipelineRequest(TypedDict, total=False):
    """One request: the producer's stamps (``perf_counter`` seconds) and facts, rank 0's,
    and ``error`` when it failed (a producer's decode, an owner's)."""

    rid: Required[int]
    warm: Required[bool]
    t_sent: Required[float]
    t_start: Required[float]
    worker: Required[int]
    max_tokens: Required[int]
    # the producer
    t_decoded: float
    feature_bytes: int
    image_tokens: int
    patches: int
    deferred_images: int
    decision_reasons: list[str]
    image_decisions: list[list[int]]  # per image: [deferred, raw bytes, FP32 bytes, encoded]
    decodes: list[tuple[str, str]]  # (decoder, why) per image
    error: str
    t_produced: float
    items: Any  # the producer's packed payload (dropped before the record leaves rank 0)
    # rank 0
    t_recv: float
    producer_copied_bytes: int
    scheduler_copied_bytes: int
    batch_id: int
    t_step: float
    t_first: float
    batch_requests: int
    recipe: dict[str, list[str]]  # pipeline.recipe_record


class Batch(TypedDict):
    """Rank 0's step, broadcast to every rank: the requests it takes, whether the loop
    stops (and stalled), when the step began and the running requests it decodes."""

    reqs: list[PipelineRequest]
    stop: bool
    stalled: bool
    t_step: float
    decode: list[int]


class TokensMessage(TypedDict):
    """A decode step's tokens (rank 0's ``tokens``): the requests that got one, when, and
    those that are done."""

    rids: list[int]
    t: float
    done: list[int]
