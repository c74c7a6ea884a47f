"""Typed models of ``report.json``, one per kind: what ``gate``, ``compare``, the figures
and ``project`` read, with the constraints the gate relies on (numbers are numbers, finite,
and times, bytes and counts never negative).

Only what a consumer reads is typed. Every model allows extra fields, so that a report
may carry more than this version of kimi-bench knows (new arms, new summary numbers, a
payload-cost block) and a field another writer adds does not make a report unreadable.
Fields are optional where older or partial reports lack them: a metric a report lacks
fails its rule by name in the gate instead of making the whole file unreadable.

Numbers are strict (``"9.0"`` is refused, not converted) and the models only validate:
``Report`` keeps the dict as written, so a report gates and renders as it did before.
The JSON Schemas shipped in ``kimi_bench/schemas`` are generated from these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field

from kimi_bench.report.envelope import (
    Count,
    Envelope,
    Flag,
    Loose,
    NonNeg,
    Number,
    Open,
    Percent,
    Real,
    Samples,
    Summary,
    Text,
)
from kimi_bench.results.micro import MicroRepeat
from kimi_bench.results.serve_rows import ServeRequest as RequestRow

__all__ = ["MODELS", "Envelope", "model_for"]


# -------------------------------------------------------------------------------- parity


class ParityRow(Open):
    name: Text
    error: Text | None = None
    deferred: Flag | None = None
    bit_exact_fp32: Flag | None = None
    bit_exact_bf16: Flag | None = None
    width: Loose[int] = None
    height: Loose[int] = None
    max_abs_diff_vs_pil: Loose[Number] = None

    @property
    def size(self) -> str:
        """``640x480``, or "" when the row does not say."""
        w, h = self.width, self.height
        return f"{w}x{h}" if w and h else ""


class Differing(Open):
    differing: Any = None


class ParitySummary(Summary):
    accepted: Count | None = None
    all_bit_exact_fp32: Any = None
    all_bit_exact_bf16: Any = None
    differing: Any = None
    deferred_decode: Loose[Differing] = None
    reference: Loose[Differing] = None


class ParityReport(Envelope):
    summary: ParitySummary = Field(default_factory=ParitySummary)
    results: list[ParityRow] = Field(default_factory=list)  # type: ignore[assignment]


# --------------------------------------------------------------------------------- micro


class Compared(Open):
    """A comparison block as a verdict reads it (a micro speedup ratio, a serve-ab percent
    delta): numbers of another type or not finite read as missing."""

    class Spread(Open):
        low: Loose[Number] = None
        high: Loose[Number] = None
        kind: Loose[str] = None
        n_units: Any = None

    median: Loose[Number] = None
    delta_pct: Loose[Number] = None
    interval: Loose[Spread] = None
    n_units: Any = None
    n: Any = None
    b_units: Any = None
    significant: Any = None
    verdict: Loose[str] = None


class SampleBlock(Open):
    """A measured quantity: its raw samples (and, as written, their summary)."""

    samples: Samples = Field(default_factory=list)
    median: Loose[Number] = None
    n: Loose[Real] = None
    mean: Loose[Real] = None
    p10: Loose[Real] = None
    p25: Loose[Real] = None
    p75: Loose[Real] = None
    p90: Loose[Real] = None
    iqr: Loose[Real] = None
    min: Loose[Real] = None
    max: Loose[Real] = None
    interval: Loose[Compared.Spread] = None


class StageBlock(Open):
    samples_ms: Samples = Field(default_factory=list)
    summary_ms: Loose[SampleBlock] = None
    bytes: Loose[int] = None
    applicable: Loose[bool] = None  # false: the stage did not run in this arm


class CopyRow(Open):
    """One row of an arm's copy ledger (``arms.<arm>.copies``)."""

    stage: Loose[str] = None
    op: Loose[str] = None
    bytes: Loose[int] = None
    count: Loose[int] = None
    copies: Loose[bool] = None  # false: the op moves no bytes (a view, a handle)


def _no_samples(value: Any) -> Any:
    """An arm that ran no repeat (a run stopped before it) is written with ``total_ms:
    null``: read as a block of no samples."""
    return {} if value is None else value


class MicroArm(Open):
    """One arm; it may lack blocks (older or partial runs)."""

    total_ms: Annotated[SampleBlock, BeforeValidator(_no_samples)] = Field(
        default_factory=SampleBlock
    )
    stages: dict[str, StageBlock] = Field(default_factory=dict)
    copies: Loose[list[CopyRow]] = None
    moved_bytes: Any = None  # checked against the ledger by the read check


class Floor(Open):
    pinned_h2d_gbps: Loose[Number] = None


class MicroSummary(Summary):
    speedup_median: NonNeg | None = None
    deferred_over_floor: NonNeg | None = None
    bytes_ratio: NonNeg | None = None
    floor_ms: NonNeg | None = None
    deferred_median_ms: NonNeg | None = None
    repeats_completed: Count | None = None
    bit_exact_all_repeats: Flag | None = None
    control_rounds: Count = 0
    floor_with_control_ms: NonNeg | None = None
    emulation_only_stages: list[Text] = Field(default_factory=list)
    speedup_interval: Loose[Compared.Spread] = None


# Control plane and payload cost (micro reports since issue 23; optional, so older reports
# stay valid): the blocks the payload figure and the HTML page read (every field of a cost
# is read, so each is required), and the raw control rounds the gate recomputes from.
class Interval(Open):
    low: Number | None
    high: Number | None
    kind: Literal["ci", "prediction", "range", "none"]


class Cost(Open):
    arm_ms: Number | None
    control_ms: Number | None
    payload_ms: Number | None
    interval: Interval


class PayloadCost(Open):
    stages: dict[str, Cost]
    total: Cost
    total_without_emulation: Cost


class ApartStage(Open):
    """A stage that only exists because of the emulation (or stands in for real work)."""

    stage: Text
    kind: Literal["emulation_only", "stand_in"]
    why: Text


class ControlFloor(Open):
    data_floor_ms: NonNeg | None
    control_ms: NonNeg | None
    floor_ms: NonNeg | None


class ControlArm(Open):
    total_ms: SampleBlock | None = None
    stages: dict[str, StageBlock] = Field(default_factory=dict)


class Control(Open):
    rounds: Count
    arms: dict[str, ControlArm]
    payload: dict[str, PayloadCost]
    payload_speedups: dict[str, Any]
    emulation_only: list[ApartStage]
    floor: ControlFloor


class RepeatRecord(MicroRepeat):
    """A repeat (or control round) as written: ``results.micro.MicroRepeat``, strict."""

    model_config = ConfigDict(extra="allow", frozen=True)
    total_ms: NonNeg
    stage_ms: dict[str, NonNeg]
    stage_bytes: dict[str, Count | NonNeg] = Field(default_factory=dict)
    timeline: Any = None  # each rank's lanes (``timeline.<arm>`` shows one repeat's)


ControlRepeat = RepeatRecord


class Lanes(Open):
    repeat: Any = None  # ``timeline.<arm>``: the iteration whose lanes ``ranks`` shows
    ranks: Any = None


class MicroReport(Envelope):
    summary: MicroSummary = Field(default_factory=MicroSummary)
    arms: dict[str, MicroArm]
    speedup: SampleBlock | None = Field(default_factory=SampleBlock)  # None: one arm ran
    speedups: dict[str, SampleBlock | None] | None = None
    control: Control | None = None
    control_repeats: dict[str, list[RepeatRecord]] = Field(default_factory=dict)
    floor: Loose[Floor] = None
    floor_ms: Any = None  # the read check refuses one that is not a positive number
    repeats: dict[str, list[RepeatRecord]] | None = None
    timeline: Loose[dict[str, Loose[Lanes]]] = None


# ------------------------------------------------------------------------------ serve-ab


class Failures(Open):
    """An HTTP run's failed requests of one arm, by kind (``summary.failures``)."""

    failed: Any = None
    requests: Any = None
    kinds: Loose[dict[str, Any]] = None
    examples: Loose[dict[str, Any]] = None


class ServeSummary(Summary):
    arms: Loose[list[Any]] = None
    failed_requests: Count | None = None
    failures: Loose[dict[str, Loose[Failures]]] = None
    rates: list[Text] = Field(default_factory=list)
    client_warnings: list[Text] = Field(default_factory=list)  # late sends (serve_overhead)


class ServeRow(Open):
    rate: Text
    arm: Text
    ttft_median_ms: NonNeg | None = None
    ttft_p90_ms: NonNeg | None = None
    req_per_s: NonNeg | None = None
    completed: Count | None = None
    failed: Count | None = None


class ServeRequest(RequestRow):
    """A request row as ``results`` derives from it, its labels and numbers strict."""

    rate: Text
    arm: Text
    status: Annotated[int, Field(strict=True)] | None = None
    ttft_ms: NonNeg | None = None
    itl_ms: list[NonNeg] | None = None
    tpot_ms: Number | None = None
    e2e_ms: Number | None = None
    producer_copied_bytes: Count | None = None
    scheduler_copied_bytes: Count | None = None


class ClientOverhead(Open):
    """Per rate and arm of an HTTP run: client minus server mean TTFT, the sends' lateness
    (``bench.serve_overhead``); the server's fields are null without a TTFT histogram."""

    rate: Text
    arm: Text
    requests: Count
    client_ttft_mean_ms: NonNeg | None = None
    server_ttft_mean_ms: NonNeg | None = None
    server_metric: Text | None = None
    client_overhead_ms: Number | None = None
    client_overhead_pct: Number | None = None
    send_lateness_p99_ms: Number | None = None


class Comparison(Open):
    """B against eager for one metric: the change in percent with its interval."""

    delta_pct: Percent | None = None
    a_value: Real | None = None
    b_value: Real | None = None


class EarlierComparison(Open):
    """The earlier layout's comparison: the change as a fraction."""

    delta: Number | None = None


class ServeReport(Envelope):
    """``ab[rate][arm][metric]``: each arm's comparisons against eager at one rate."""

    summary: ServeSummary = Field(default_factory=ServeSummary)
    results: list[ServeRow] = Field(default_factory=list)  # type: ignore[assignment]
    ab: dict[str, dict[str, dict[str, Comparison | None] | None] | None] = Field(
        default_factory=dict
    )
    requests: list[ServeRequest]
    client_overhead: list[ClientOverhead] | None = None  # HTTP runs only


class EarlierServeReport(ServeReport):
    """Earlier serve-ab reports held one arm's metrics directly: ``ab[rate][metric]``."""

    ab: dict[str, dict[str, EarlierComparison | None] | None] = Field(  # type: ignore[assignment]
        default_factory=dict
    )


# ------------------------------------------------------------------------------- project


class ProjectRow(Open):
    """One projected stage (``results``), its cells shown as written."""

    transport: Any = None
    ranks: Any = None
    nodes: Any = None
    link_gbps: Any = None
    threads_per_process: Any = None
    arm: Any = None
    stage: Any = None
    predicted_ms: Any = None


class ProjectValidation(Open):
    totals: Loose[list[dict[str, Any]]] = None
    stages: Loose[list[dict[str, Any]]] = None


class ProjectReport(Envelope):
    """A projection from calibration reports: projected stages, totals, the fitted
    figures and (with measured reports) the validation's error rows."""

    results: list[ProjectRow] = Field(default_factory=list)  # type: ignore[assignment]
    totals: Loose[list[dict[str, Any]]] = None
    fitted: Loose[list[dict[str, Any]]] = None
    validation: Loose[ProjectValidation] = None


MODELS: dict[str, type[Envelope]] = {
    "parity": ParityReport,
    "micro": MicroReport,
    "serve-ab": ServeReport,
    "project": ProjectReport,
}


def earlier_ab(raw: dict[str, Any]) -> bool:
    """Whether ``ab`` uses the earlier layout (``ab[rate][metric].delta``)."""
    ab = raw.get("ab")
    entries = ab.values() if isinstance(ab, dict) else []
    return any(
        isinstance(e, dict) and any(isinstance(v, dict) and "delta" in v for v in e.values())
        for e in entries
    )


def model_for(raw: dict[str, Any]) -> type[Envelope]:
    """The model a report dict is read with (the envelope alone for kinds not typed here)."""
    kind = raw.get("kind")
    if kind == "serve-ab" and earlier_ab(raw):
        return EarlierServeReport
    return MODELS.get(str(kind), Envelope)
