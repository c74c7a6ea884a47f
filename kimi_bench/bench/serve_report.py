"""From ``serve-ab`` runs (``serve_runs.ServeRun``) to a report: the request rows, and per
rate and arm TTFT, ITL, TPOT and E2E latency at the asked percentiles, request, output-token
and image throughput, goodput under the SLOs, the stage that dominates, and A/B deltas over
``Measurement`` objects. The serving figures are derived from the request rows by
``results.serve.derive_serve`` (the read check and the gate derive them there too).

Independent units: requests served in one forward batch share one step, so TTFT, ITL,
TPOT and E2E intervals all resample forward batches (``ArmCell.measurement``): one
comparison, one statistic; a server that does not report batches (any third-party server)
makes each request its own unit (repeat:rid). Throughput and goodput intervals resample
repeats; a single repeat's is a point, never an interval. A difference is called significant only
with at least three units per side and an interval that excludes zero
(``kimi_bench.infra.stats.compare.compare``). Deltas are signed percentages, B minus A.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kimi_bench.bench.serve_runs import BOUNDS, ServedRequest, ServeRun
from kimi_bench.bench.serve_types import RequestRow, ServeCopyRow, Versus
from kimi_bench.domain.ledger import Ledger, sort_copies
from kimi_bench.infra.limits import is_interrupt
from kimi_bench.options import ServeOptions, rate_label
from kimi_bench.pipeline import STAGES as PIPELINE_STAGES
from kimi_bench.pipeline import with_role
from kimi_bench.results.serve import ArmCell, ServeRaw, derive_serve
from kimi_bench.results.serve_compare import measured_median, versus_figures
from kimi_bench.results.serve_rows import serve_requests

STAGES = ("queue_wait", "producer", "to_scheduler", "sched_wait", "step")
_CARRY = ("image_tokens", "patches", "feature_bytes", "deferred_images", "image_decisions",
          "producer_copied_bytes", "scheduler_copied_bytes", "batch_requests",
          "batch_id")  # fmt: skip


def _row(run: ServeRun, r: ServedRequest) -> RequestRow:
    """One request in the report's layout (requests.csv): client times in seconds from the
    trace start (``*_s``: no ``*_ms`` name but the latencies, the figures read the other
    ``*_ms`` names as pipeline stages)."""
    row: dict[str, Any] = {
        "rate": run.rate_label, "arm": run.arm, "repeat": run.repeat, "rid": r.rid,
        "worker": r.worker, "error": r.error, "ttft_ms": r.ttft_ms, "status": r.status,
        "output_tokens": r.output_tokens, "prompt_tokens": r.prompt_tokens,
        "images": r.images.count, "pixels": r.images.pixels,
        "encoded_bytes": r.images.encoded_bytes, "max_tokens": r.max_tokens,
        "image_sizes": [list(s) for s in r.images.sizes],
    }  # fmt: skip
    if r.ok:
        row.update(itl_ms=list(r.itl_ms), tpot_ms=r.tpot_ms, e2e_ms=r.e2e_ms)
    c = r.client
    if c is not None:
        row.update(error_kind=r.error_kind, bytes_received=c.bytes_received,
                   token_chunks=c.token_chunks, finish_reason=c.finish_reason,
                   done_marker=c.done_marker, retries=c.retries,
                   prompt_image_tokens=c.prompt_image_tokens)  # fmt: skip
        row.update({f"{k}_s": v for k, v in c.times_s.items()})
        if c.lateness_ms is not None:  # seconds here: *_ms columns are stages
            row["send_lateness_s"] = c.lateness_ms / 1e3
    elif r.error_kind:
        row["error_kind"] = r.error_kind
    bounds = {"t_sent": r.t_sent, **r.bounds, "t_first": r.t_first}
    if r.ok:
        for k, s in enumerate(STAGES):
            a, b = bounds.get(BOUNDS[k]), bounds.get(BOUNDS[k + 1])
            if a is not None and b is not None:
                row[f"{s}_ms"] = (b - a) * 1e3
    row.update({key: r.facts.get(key) for key in _CARRY})
    return cast(RequestRow, row)  # its keys are RequestRow's (the *_s, *_ms ones by name)


def request_rows(runs: Sequence[ServeRun]) -> list[RequestRow]:
    """One flat row per measured request (what requests.csv and ``data.requests`` hold)."""
    return [_row(run, r) for run in runs for r in run.records]


def copy_rows(runs: Sequence[ServeRun]) -> list[ServeCopyRow]:
    """The copy ledger of each (rate, arm) run, repeats summed, in pipeline order."""
    merged: dict[tuple[str, str], Ledger] = {}
    for run in runs:
        merged.setdefault((run.rate_label, run.arm), Ledger()).merge(run.copies or [])
    return [
        ServeCopyRow(rate=rate, arm=arm, **row)
        for (rate, arm), ledger in merged.items()
        for row in sort_copies(ledger.rows(), PIPELINE_STAGES)
    ]


def cut_short(run: ServeRun, r: ServedRequest) -> bool:
    """A request of an interrupted run that the interrupt cut off (in flight at Ctrl-C or
    SIGTERM): not a failure of the server, like the requests the run never sent."""
    return is_interrupt(run.error) and not r.ok and r.error_kind == "cancelled"


def not_run(run: ServeRun) -> int:
    """Planned requests of a run that the interrupt kept from running to the end (never
    sent, or cut off in flight); 0 for a run that was not interrupted."""
    if not is_interrupt(run.error):
        return 0
    return run.unsent + sum(cut_short(run, r) for r in run.records)


@dataclass
class ArmFailures:
    """One arm's failed (and planned but unsent) requests by kind, the first error text
    of each kind; ``interrupted``: the requests an interrupt kept from running (never sent
    or cut off in flight), which are not failures."""

    failed: int = 0
    requests: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)
    interrupted: int = 0

    def add(self, kind: str, example: str, n: int = 1) -> None:
        self.failed += n
        self.kinds[kind] = self.kinds.get(kind, 0) + n
        self.examples.setdefault(kind, example)

    def text(self, arm: str) -> str:
        """``b: 6 of 6 requests failed (http x6: HTTP 500 ...)``."""
        kinds = "; ".join(f"{k} x{n}: {self.examples[k]}" for k, n in self.kinds.items())
        return f"{arm}: {self.failed} of {self.requests} requests failed ({kinds})"


def failures(runs: Sequence[ServeRun]) -> dict[str, ArmFailures]:
    out: dict[str, ArmFailures] = {}
    for run in runs:
        f = out.setdefault(run.arm, ArmFailures())
        f.requests += len(run.records) + run.unsent
        f.interrupted += not_run(run)
        if run.unsent and not is_interrupt(run.error):  # a dead arm's rest: failures
            f.add("unsent", run.error or "not sent", run.unsent)
        for r in run.records:
            if r.error and not cut_short(run, r):
                f.add(r.error_kind or "failed", r.error)
    return out


def run_throughput(run: ServeRun) -> float:
    """Completed requests / (last first token - trace start) of one run."""
    firsts = [r.t_first for r in run.records if r.ok and r.t_first is not None]
    if not firsts or run.trace_start is None:
        return math.nan
    span = max(firsts) - run.trace_start
    return len(firsts) / span if span > 0 else math.nan


def derive_rows(rows: list[RequestRow], opts: ServeOptions) -> ArmCell:
    """The serving figures of one arm's request rows at one rate (``derive_serve``)."""
    derived = derive_serve(ServeRaw(tuple(serve_requests(rows)), opts.slos))
    cells = list(derived.cells.values())
    return cells[0] if cells else ArmCell("", "", (), opts.slos)


def arm_row(
    label: str, arm: str, runs: Sequence[ServeRun], rows: list[RequestRow], opts: ServeOptions
) -> dict[str, Any]:
    """One per-rate row: TTFT (and ITL, TPOT, E2E) at the asked percentiles, throughputs,
    goodput, the stage medians; ``unit_label`` says what ``forward_batches`` counts."""
    cell = derive_rows(rows, opts)
    ttft = cell.measurement("ttft", f"{arm} TTFT @ {label}")
    thr = [run_throughput(r) for r in runs]
    medians = cell.stage_medians([f"{s}_ms" for s in STAGES], measured_median)
    stages = {s: medians.get(f"{s}_ms", math.nan) for s in STAGES}
    known = {s: v for s, v in stages.items() if not math.isnan(v)}
    span_rate = sum(x for x in thr if not math.isnan(x)) / max(1, len(thr))
    return {
        "rate": label,
        "arm": arm,
        "ttft_mean_ms": ttft.mean if ttft.n else math.nan,
        **cell.rate_figures(opts.metric_percentiles),
        "req_per_s": span_rate,
        # images a completed request carried, on average (a workload mixes counts)
        "images_per_s": span_rate * cell.mean_images(opts.images_per_request),
        "completed": cell.completed,
        # planned but not completed, less what an interrupt kept from running
        "failed": (opts.requests or 0) * len(runs) - cell.completed - sum(map(not_run, runs)),
        # units of TTFT: forward batches, or requests where the server reports no batches
        "forward_batches": ttft.n_units,
        "units": "forward batches" if cell.batched else "requests",
        "bytes_moved": cell.bytes_moved,
        "dominant_stage": max(known, key=lambda s: known[s]) if known else None,
        **{f"{s}_ms": v for s, v in stages.items()},
    }


def base_arm(arms: Sequence[str], endpoints: bool = False) -> str:
    """What the other arms are compared with: the first endpoint given, else the baseline
    arm (eager), else the first arm."""
    return (None if endpoints else with_role(arms, "baseline")) or arms[0]


def versus(
    base: tuple[str, Sequence[ServeRun]], arm: tuple[str, Sequence[ServeRun]], opts: ServeOptions
) -> Versus:
    """One arm vs another: median and p90 TTFT, median ITL/TPOT/E2E (when measured), all
    over the same units (``ArmCell.measurement``), throughput and goodput over repeats
    (B minus A, %; one repeat: a point).
    Derived by ``results.serve_compare.versus_figures``."""
    (na, ra), (nb, rb) = base, arm
    ca, cb = derive_rows(request_rows(ra), opts), derive_rows(request_rows(rb), opts)
    ta = [x for x in map(run_throughput, ra) if math.isfinite(x)]
    tb = [x for x in map(run_throughput, rb) if math.isfinite(x)]
    return versus_figures((na, ca, ta), (nb, cb, tb), opts.seed, bool(opts.slos))


def ab_for_rate(per_arm: dict[str, list[ServeRun]], opts: ServeOptions) -> dict[str, Versus]:
    """Each arm vs the base arm (eager, or the first endpoint) at one rate; with the
    proposed arms also ``zero-copy_vs_deferred``, ``deferred-decode_vs_deferred`` and
    ``deferred-decode_vs_zero-copy``."""
    first = base_arm(list(per_arm), bool(opts.endpoints))
    out = {
        arm: versus((first, per_arm[first]), (arm, runs), opts)
        for arm, runs in per_arm.items()
        if arm != first
    }
    # the proposed arms against the runtime's deferred arm (and deferred-decode against
    # zero-copy): what each proposal adds on top of the change
    for arm, base in (("zero-copy", "deferred"), ("deferred-decode", "deferred"),
                      ("deferred-decode", "zero-copy")):  # fmt: skip
        if arm in per_arm and base in per_arm and not opts.endpoints:
            out[f"{arm}_vs_{base}"] = versus((base, per_arm[base]), (arm, per_arm[arm]), opts)
    return out


@dataclass
class PerRate:
    """The per-rate rows (``results``) and the A/B block (``ab``) of a report."""

    rows: list[dict[str, Any]]  # keys by the asked percentiles (ArmCell.rate_figures)
    ab: dict[str, dict[str, Versus]]  # rate -> arm -> its comparisons with the base arm


def per_rate(opts: ServeOptions, runs: Sequence[ServeRun]) -> PerRate:
    out = PerRate([], {})
    for i, rate in enumerate(opts.rates):
        label = rate_label(rate)
        names = list(dict.fromkeys([*opts.arms, *(r.arm for r in runs)]))
        per_arm = {arm: [r for r in runs if r.at.rate_index == i and r.arm == arm]
                   for arm in names}  # fmt: skip
        per_arm = {a: rs for a, rs in per_arm.items() if rs}
        for arm, rs in per_arm.items():
            row = arm_row(label, arm, rs, request_rows(rs), opts)
            if any(is_interrupt(r.error) for r in rs):
                row["interrupted"] = sum(not_run(r) for r in rs)
            out.rows.append(row)
        compared = comparable(per_arm, opts)
        if len(compared) > 1:
            out.ab[label] = ab_for_rate(compared, opts)
    return out


def comparable(per_arm: dict[str, list[ServeRun]], opts: ServeOptions) -> dict[str, list[ServeRun]]:
    """The arms of one rate that may be compared: none whose runs an interrupt cut short
    (a partial arm against a complete one measures the interrupt), and nothing at all when
    the base arm is the one cut short."""
    if not per_arm:
        return {}
    whole = {a: rs for a, rs in per_arm.items() if not any(is_interrupt(r.error) for r in rs)}
    base = base_arm(list(per_arm), bool(opts.endpoints))
    return whole if base in whole else {}


@dataclass(frozen=True)
class ServePart:
    """What the runs give a ``serve-ab`` report, derived in one place: the per-rate rows
    and the A/B block, the request rows, the failures per arm and the copy ledger rows."""

    rows: list[dict[str, Any]]
    ab: dict[str, dict[str, Versus]]
    requests: list[RequestRow]
    failures: dict[str, ArmFailures]
    copies: list[ServeCopyRow]


def serve_part(opts: ServeOptions, runs: Sequence[ServeRun], names: Sequence[str]) -> ServePart:
    """The runs' part of a ``serve-ab`` report (``names``: the arms, or the endpoints)."""
    table = per_rate(opts, runs)
    return ServePart(
        rows=table.rows,
        ab=table.ab,
        requests=request_rows(runs),
        failures=failures(runs),
        copies=copy_rows(runs),
    )
