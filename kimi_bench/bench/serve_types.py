"""The rows ``serve-ab`` writes (``data.requests``, requests.csv; ``data.copies``) and its
A/B block (``data.ab``), typed: built by ``serve_report`` from ``serve_runs.ServeRun``."""

from __future__ import annotations

from typing import TypedDict

from kimi_bench.domain.ledger import CopyRow
from kimi_bench.infra.stats.compare import ComparisonDoc, NoComparison


class RequestRow(TypedDict, total=False):
    """One measured request (``serve_report._row``). Always: the first block; a served
    request adds its latencies and pipeline stages (``*_ms``), an HTTP one its client side
    (times ``*_s`` from the trace start); the server's facts close it."""

    rate: str
    arm: str
    repeat: int
    rid: int
    worker: int | None
    error: str | None
    ttft_ms: float | None
    status: int | None
    output_tokens: int | None
    prompt_tokens: int | None
    images: int
    pixels: int
    encoded_bytes: int
    max_tokens: int | None
    image_sizes: list[list[int]]  # per image: width, height, encoded bytes
    # served
    itl_ms: list[float]
    tpot_ms: float | None
    e2e_ms: float | None
    # the HTTP client's side (error_kind also for a failed in-process request)
    error_kind: str | None
    bytes_received: int
    token_chunks: int
    finish_reason: str | None
    done_marker: bool
    retries: int
    prompt_image_tokens: int | None
    scheduled_s: float | None
    sent_s: float | None
    wire_sent_s: float | None
    first_byte_s: float | None
    first_chunk_s: float | None  # the first chunk with choices (vllm bench serve's TTFT end)
    first_token_s: float | None
    end_s: float | None
    send_lateness_s: float
    # pipeline stages of a served request (serve_report.STAGES)
    queue_wait_ms: float
    producer_ms: float
    to_scheduler_ms: float
    sched_wait_ms: float
    step_ms: float
    # what the server reported of it (serve_report._CARRY; None when it did not)
    image_tokens: int | None
    patches: int | None
    feature_bytes: int | None
    deferred_images: int | None
    image_decisions: list[list[int]] | None  # per image: deferred, raw, FP32 bytes, encoded
    producer_copied_bytes: int | None
    scheduler_copied_bytes: int | None
    batch_requests: int | None
    batch_id: int | None


class ServeCopyRow(CopyRow):
    """A (rate, arm)'s copy-ledger row, repeats summed (``data.copies``)."""

    rate: str
    arm: str


# one arm against another: comparison name (median_ttft, p90_ttft, throughput, median_itl,
# ..., goodput) -> the comparison
Versus = dict[str, ComparisonDoc | NoComparison]
