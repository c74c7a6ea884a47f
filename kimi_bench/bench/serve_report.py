"""From ``serve-ab`` runs to a report: TTFT and throughput per rate and arm, the stage
that dominates, and A/B deltas over ``Measurement`` objects.

Independent units: requests served in one forward batch share one step, so TTFT
intervals resample forward batches (``unit_ids`` = repeat:batch); a server that does not
report batches (any third-party server) makes each request its own unit (repeat:rid).
Throughput intervals resample repeats. A difference is called significant only with at least three
units per side and an interval that excludes zero (``kimi_bench.infra.stats.compare.compare``).
Deltas are signed percentages, B minus A (each arm vs eager).
"""

from __future__ import annotations

import math
from typing import Any

from kimi_bench.domain.ledger import Ledger, sort_copies
from kimi_bench.infra.stats import Measurement, percentile
from kimi_bench.infra.stats.compare import compare
from kimi_bench.options import ServeOptions, rate_label
from kimi_bench.pipeline import STAGES as PIPELINE_STAGES
from kimi_bench.pipeline import with_role

STAGES = ("queue_wait", "producer", "to_scheduler", "sched_wait", "step")
_BOUNDS = ("t_sent", "t_start", "t_produced", "t_recv", "t_step", "t_first")
_CARRY = ("image_tokens", "patches", "feature_bytes", "deferred_images", "producer_copied_bytes",
          "scheduler_copied_bytes", "batch_requests", "batch_id", "status")  # fmt: skip
# what the HTTP client recorded of every request (present on HTTP runs; no *_ms names, which
# the figures read as pipeline stages); its times become scheduled_s, sent_s, first_byte_s,
# first_token_s and end_s (seconds from the trace start, client clock)
_CLIENT = ("error_kind", "bytes_received", "token_chunks", "output_tokens",
           "finish_reason", "done_marker", "retries")  # fmt: skip


def request_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per measured request (what requests.csv holds)."""
    rows = []
    for run in runs:
        for r in run["records"]:
            row = {
                "rate": run["rate_label"],
                "arm": run["arm"],
                "repeat": run["repeat"],
                "rid": r["rid"],
                "worker": r.get("worker"),
                "error": r.get("error"),
                "ttft_ms": r.get("ttft_ms"),
            }
            row.update({k: r[k] for k in _CLIENT if k in r})
            row.update({f"{k}_s": v for k, v in (r.get("times_s") or {}).items()})
            if r.get("lateness_ms") is not None:  # seconds here: *_ms columns are stages
                row["send_lateness_s"] = r["lateness_ms"] / 1e3
            if "t_first" in r and not r.get("error"):
                row["ttft_ms"] = (r["t_first"] - r["t_sent"]) * 1e3
                for k, s in enumerate(STAGES):
                    if _BOUNDS[k] in r and _BOUNDS[k + 1] in r:
                        row[f"{s}_ms"] = (r[_BOUNDS[k + 1]] - r[_BOUNDS[k]]) * 1e3
            row.update({key: r.get(key) for key in _CARRY})
            rows.append(row)
    return rows


def copy_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The copy ledger of each (rate, arm) run, repeats summed, in pipeline order."""
    merged: dict[tuple[str, str], Ledger] = {}
    for run in runs:
        key = (run["rate_label"], run["arm"])
        merged.setdefault(key, Ledger()).merge(run.get("copies") or [])
    return [
        {"rate": rate, "arm": arm, **row}
        for (rate, arm), ledger in merged.items()
        for row in sort_copies(ledger.rows(), PIPELINE_STAGES)
    ]


def ttft_measurement(rows: list[dict[str, Any]], label: str) -> Measurement:
    ok = [r for r in rows if r.get("ttft_ms") is not None and not r.get("error")]
    return Measurement(
        [r["ttft_ms"] for r in ok],
        unit="ms",
        label=label,
        unit_ids=[f"{r['repeat']}:{_unit(r)}" for r in ok],
    )


def _unit(row: dict[str, Any]) -> str:
    """A request's independent unit: its forward batch when the server reports one, else
    the request itself."""
    batch = row.get("batch_id")
    return f"b{batch}" if batch is not None else f"r{row['rid']}"


def failures(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per arm: measured requests failed (and planned but unsent), counted by error kind,
    with the first error text of each kind."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        f = out.setdefault(run["arm"], {"failed": 0, "requests": 0, "kinds": {}, "examples": {}})
        f["requests"] += len(run["records"]) + (run.get("unsent") or 0)
        f["failed"] += run.get("unsent") or 0
        if run.get("unsent"):
            f["kinds"]["unsent"] = f["kinds"].get("unsent", 0) + run["unsent"]
            f["examples"].setdefault("unsent", run.get("error") or "not sent")
        for r in run["records"]:
            if r.get("error"):
                kind = r.get("error_kind") or "failed"
                f["failed"] += 1
                f["kinds"][kind] = f["kinds"].get(kind, 0) + 1
                f["examples"].setdefault(kind, r["error"])
    return out


def failure_text(arm: str, f: dict[str, Any]) -> str:
    """``b: 6 of 6 requests failed (http x6: HTTP 500 ...)``."""
    kinds = "; ".join(f"{k} x{n}: {f['examples'][k]}" for k, n in f["kinds"].items())
    return f"{arm}: {f['failed']} of {f['requests']} requests failed ({kinds})"


def run_throughput(run: dict[str, Any], rows: list[dict[str, Any]], opts: ServeOptions) -> float:
    """Completed requests / (last first token - trace start) of one run."""
    ok = [r for r in run["records"] if not r.get("error") and "t_first" in r]
    start = run.get("trace_start")
    if not ok or start is None:
        return math.nan
    span = max(r["t_first"] for r in ok) - start
    return len(ok) / span if span > 0 else math.nan


def arm_row(label: str, arm: str, runs: list[dict[str, Any]], opts: ServeOptions) -> dict[str, Any]:
    rows = request_rows(runs)
    ttft = ttft_measurement(rows, f"{arm} TTFT @ {label}")
    thr = [run_throughput(r, rows, opts) for r in runs]
    ok = [r for r in rows if r.get("ttft_ms") is not None and not r.get("error")]
    stages = {s: Measurement([r[f"{s}_ms"] for r in ok if f"{s}_ms" in r]).median for s in STAGES}
    known = {s: v for s, v in stages.items() if not math.isnan(v)}
    moved = sum((r.get("producer_copied_bytes") or 0) + (r.get("scheduler_copied_bytes") or 0)
                for r in ok)  # fmt: skip
    span_rate = sum(x for x in thr if not math.isnan(x)) / max(1, len(thr))
    return {
        "rate": label,
        "arm": arm,
        "ttft_mean_ms": ttft.mean if ttft.n else math.nan,
        "ttft_median_ms": ttft.median if ttft.n else math.nan,
        "ttft_p90_ms": ttft.p90 if ttft.n else math.nan,
        "ttft_p99_ms": percentile(list(ttft.samples), 99) if ttft.n else math.nan,
        "req_per_s": span_rate,
        "images_per_s": span_rate * opts.images_per_request,
        "completed": len(ok),
        "failed": (opts.requests or 0) * len(runs) - len(ok),
        "forward_batches": ttft.n_units,
        "bytes_moved": moved,
        "dominant_stage": max(known, key=lambda s: known[s]) if known else None,
        **{f"{s}_ms": v for s, v in stages.items()},
    }


def base_arm(arms: list[str], endpoints: bool = False) -> str:
    """What the other arms are compared with: the first endpoint given, else the baseline
    arm (eager), else the first arm."""
    return (None if endpoints else with_role(arms, "baseline")) or arms[0]


def _versus(
    base_runs: list[dict[str, Any]], runs: list[dict[str, Any]], opts: ServeOptions, names: tuple
) -> dict[str, Any]:
    """One arm vs another: median and p90 TTFT over forward batches, throughput over
    repeats (B minus A, signed %)."""
    a_rows, b_rows = request_rows(base_runs), request_rows(runs)
    a, b = ttft_measurement(a_rows, names[0]), ttft_measurement(b_rows, names[1])
    a_thr = _finite([run_throughput(r, a_rows, opts) for r in base_runs])
    b_thr = _finite([run_throughput(r, b_rows, opts) for r in runs])
    return {
        "median_ttft": compare(a, b, q=50, seed=opts.seed).as_dict(),
        "p90_ttft": compare(a, b, q=90, seed=opts.seed).as_dict(),
        "throughput": _safe_compare(a_thr, b_thr, opts.seed),
    }


def ab_for_rate(
    per_arm: dict[str, list[dict[str, Any]]], opts: ServeOptions, label: str
) -> dict[str, Any]:
    """Each arm vs the base arm (eager, or the first endpoint) at one rate; with the
    proposed arms also ``zero-copy_vs_deferred``, ``deferred-decode_vs_deferred`` and
    ``deferred-decode_vs_zero-copy``."""
    first = base_arm(list(per_arm), bool(opts.endpoints))
    out = {
        arm: _versus(per_arm[first], runs, opts, (first, arm))
        for arm, runs in per_arm.items()
        if arm != first
    }
    # the proposed arms against the runtime's deferred arm (and deferred-decode against
    # zero-copy): what each proposal adds on top of the change
    for arm, base in (("zero-copy", "deferred"), ("deferred-decode", "deferred"),
                      ("deferred-decode", "zero-copy")):  # fmt: skip
        if arm in per_arm and base in per_arm and not opts.endpoints:
            out[f"{arm}_vs_{base}"] = _versus(per_arm[base], per_arm[arm], opts, (base, arm))
    return out


def _finite(xs: list[float]) -> Measurement:
    """Throughput of the runs that completed a request (a run with none has no rate)."""
    return Measurement([x for x in xs if math.isfinite(x)], unit="req/s")


def _safe_compare(a: Measurement, b: Measurement, seed: int) -> dict[str, Any]:
    if not a.n or not b.n:
        return {"delta_pct": None, "verdict": "no completed runs", "significant": False}
    return compare(a, b, seed=seed).as_dict()


def stage_notes(rows: list[dict[str, Any]], base: str) -> list[str]:
    """Per rate: per-request stage medians of the baseline vs each other arm and the stage
    that makes the largest part of the TTFT difference (signed: other minus baseline)."""
    by = {(r["rate"], r["arm"]): r for r in rows}
    out = []
    for rate, arm in dict.fromkeys((r["rate"], r["arm"]) for r in rows if r["arm"] != base):
        e, d = by.get((rate, base)), by.get((rate, arm))
        if e and d and any(f"{s}_ms" not in e or f"{s}_ms" not in d for s in STAGES):
            continue
        if not e or not d:
            continue
        diffs = {s: d[f"{s}_ms"] - e[f"{s}_ms"] for s in STAGES}
        if any(math.isnan(v) for v in diffs.values()):
            continue
        top = max(diffs, key=lambda s: abs(diffs[s]))
        parts = ", ".join(f"{s} {e[f'{s}_ms']:.1f}/{d[f'{s}_ms']:.1f}" for s in STAGES)
        out.append(
            f"rate {rate}: median TTFT eager {e['ttft_median_ms']:.0f} ms vs {arm} "
            f"{d['ttft_median_ms']:.0f} ms; per-request stage medians eager/{arm} (ms): "
            f"{parts}; the largest difference is {top} ({arm} minus eager "
            f"{diffs[top]:+.1f} ms)."
        )
    return out


def per_rate(opts: ServeOptions, runs: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ab: dict[str, Any] = {}
    for i, rate in enumerate(opts.rates):
        label = rate_label(rate)
        names = list(dict.fromkeys([*opts.arms, *(r["arm"] for r in runs)]))
        per_arm: dict[str, list[dict[str, Any]]] = {
            arm: [r for r in runs if r["rate_index"] == i and r["arm"] == arm] for arm in names
        }
        per_arm = {a: rs for a, rs in per_arm.items() if rs}
        rows += [arm_row(label, arm, rs, opts) for arm, rs in per_arm.items()]
        if len(per_arm) > 1:
            ab[label] = ab_for_rate(per_arm, opts, label)
    return rows, ab
