"""From ``serve-ab`` runs to a report: TTFT and throughput per rate and arm, the stage
that dominates, and A/B deltas with bootstrap (or repeat-based) intervals."""

from __future__ import annotations

import functools
import math
from typing import Any

from kimi_bench.bench.serve import ARMS, ServeOptions, rate_label
from kimi_bench.bench.stats import bootstrap_interval, median, percentile, relative_change
from kimi_bench.environment import environment
from kimi_bench.ledger import Ledger, sort_copies
from kimi_bench.pipeline import STAGES as PIPELINE_STAGES
from kimi_bench.report import Report, View
from kimi_bench.runtime import get_profile

STAGES = ("queue_wait", "producer", "to_scheduler", "sched_wait", "step")
_BOUNDS = ("t_sent", "t_start", "t_produced", "t_recv", "t_step", "t_first")


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
            }
            if "t_first" in r and "error" not in r:
                row["ttft_ms"] = (r["t_first"] - r["t_sent"]) * 1e3
                for k, s in enumerate(STAGES):
                    row[f"{s}_ms"] = (r[_BOUNDS[k + 1]] - r[_BOUNDS[k]]) * 1e3
            for key in (
                "image_tokens",
                "patches",
                "feature_bytes",
                "deferred_images",
                "producer_copied_bytes",
                "scheduler_copied_bytes",
                "batch_requests",
            ):
                row[key] = r.get(key)
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


def run_metrics(run: dict[str, Any], opts: ServeOptions) -> dict[str, Any]:
    ok = [r for r in run["records"] if "error" not in r and "t_first" in r]
    ttft = [(r["t_first"] - r["t_sent"]) * 1e3 for r in ok]
    start = run.get("trace_start")
    span = (max(r["t_first"] for r in ok) - start) if ok and start is not None else math.nan
    tokens = sum(r["image_tokens"] + opts.cost.text_tokens_per_request for r in ok)
    moved = sum(
        (r.get("producer_copied_bytes") or 0) + (r.get("scheduler_copied_bytes") or 0) for r in ok
    )
    stage_medians = {
        s: median([(r[_BOUNDS[k + 1]] - r[_BOUNDS[k]]) * 1e3 for r in ok])
        for k, s in enumerate(STAGES)
    }
    return {
        "ttft_ms": ttft,
        "completed": len(ok),
        "failed": opts.requests - len(ok),
        "span_s": span,
        "req_per_s": len(ok) / span if span and span > 0 else math.nan,
        "images_per_s": len(ok) * opts.images_per_request / span if span and span > 0 else math.nan,
        "tokens_per_s": tokens / span if span and span > 0 else math.nan,
        "bytes_moved": moved,
        "stage_median_ms": stage_medians,
    }


def _ratio_delta(a: list[float], b: list[float], q: float) -> float:
    return relative_change(percentile(a, q), percentile(b, q))


def ab_for_rate(per_arm: dict[str, list[dict[str, Any]]], seed: int) -> dict[str, Any]:
    """Deferred vs eager at one rate (repeats pooled for TTFT, paired for throughput)."""
    e_runs, d_runs = per_arm.get("eager", []), per_arm.get("deferred", [])
    if not e_runs or not d_runs:
        return {}
    e = [x for m in e_runs for x in m["ttft_ms"]]
    d = [x for m in d_runs for x in m["ttft_ms"]]
    out: dict[str, Any] = {}
    for name, q in (("median_ttft", 50.0), ("p90_ttft", 90.0)):
        delta = _ratio_delta(e, d, q)
        lo, hi = bootstrap_interval(e, d, functools.partial(_ratio_delta, q=q), seed=seed)
        out[name] = {
            "delta": delta,
            "ci95": [lo, hi],
            "method": "bootstrap over requests",
            "significant": bool(lo > 0 or hi < 0),
        }
    thr = [
        relative_change(a["req_per_s"], b["req_per_s"])
        for a, b in zip(e_runs, d_runs, strict=False)
    ]
    pooled = relative_change(
        sum(m["req_per_s"] for m in e_runs) / len(e_runs),
        sum(m["req_per_s"] for m in d_runs) / len(d_runs),
    )
    if len(thr) >= 2:
        ci = [min(thr), max(thr)]
        out["throughput"] = {
            "delta": pooled,
            "ci95": ci,
            "method": "min-max over repeats",
            "significant": bool(ci[0] > 0 or ci[1] < 0),
        }
    else:
        out["throughput"] = {
            "delta": pooled,
            "ci95": None,
            "significant": None,
            "method": "single repeat: no interval (use --repeats >= 2)",
        }
    return out


def stage_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Per rate: the per-request stage medians of both arms and the stage that makes the
    largest part of the TTFT difference (data-driven explanation of the A/B)."""
    by = {(r["rate"], r["arm"]): r for r in rows}
    out = []
    for rate in dict.fromkeys(r["rate"] for r in rows):
        e, d = by.get((rate, "eager")), by.get((rate, "deferred"))
        if not e or not d:
            continue
        diffs = {s: e[f"{s}_ms"] - d[f"{s}_ms"] for s in STAGES}
        if any(math.isnan(v) for v in diffs.values()):
            continue
        top = max(diffs, key=lambda s: abs(diffs[s]))
        parts = ", ".join(f"{s} {e[f'{s}_ms']:.1f}/{d[f'{s}_ms']:.1f}" for s in STAGES)
        out.append(
            f"rate {rate}: median TTFT eager {e['ttft_median_ms']:.0f} ms vs deferred "
            f"{d['ttft_median_ms']:.0f} ms; per-request stage medians eager/deferred (ms): "
            f"{parts}; the largest difference is {top} ({diffs[top]:+.1f} ms)."
        )
    return out


def _fmt_ci(ci: list[float] | None) -> str | None:
    return None if ci is None else f"{ci[0]:+.1%} .. {ci[1]:+.1%}"


def build_serve_report(
    opts: ServeOptions, runs: list[dict[str, Any]], device: Any, error: str | None
) -> Report:
    import torch

    rows: list[dict[str, Any]] = []
    ab: dict[str, Any] = {}
    notes = [
        "The vision encoder and the prefill are STAND-INS (matmul chains sized by patch and "
        f"token counts: {opts.cost.encoder_gflop_per_patch} GFLOP/patch, "
        f"{opts.cost.prefill_gflop_per_token} GFLOP/token split over {opts.ranks} ranks), not "
        "the model; the gather carries metadata only. TTFT ends at the first token after "
        "prefill; there is no decode.",
        "TTFT = first token time - time the load generator sent the request. Throughput = "
        "completed requests / (last first token - trace start). Warm-up requests excluded.",
    ]
    notes.append(
        f"runtime profile {opts.runtime}: {get_profile(opts.runtime).description}; "
        "the copies table is the ledger of every pixel-byte move of the measured requests."
    )
    if device.type == "cpu":
        notes.append(
            f"CPU only: stand-in FLOPs scaled by {opts.cost.cpu_flops_scale}; the device is "
            "emulated in host memory (each H2D/D2H of the runtime is a host copy here)."
        )
    elif torch.cuda.device_count() < opts.ranks:
        gpus = torch.cuda.device_count()
        notes.append(
            f"{opts.ranks} ranks share {gpus} GPU(s): each rank's stand-in FLOPs are scaled "
            f"by {gpus}/{opts.ranks} so that stand-in device time per step matches "
            f"{opts.ranks} ranks on {opts.ranks} GPUs; host-to-device copies of all ranks "
            "still share one PCIe link."
        )
    for i, rate in enumerate(opts.rates):
        label = rate_label(rate)
        per_arm: dict[str, list[dict[str, Any]]] = {}
        for arm in ARMS:
            arm_runs = [r for r in runs if r["rate_index"] == i and r["arm"] == arm]
            if not arm_runs:
                continue
            metrics = [run_metrics(r, opts) for r in arm_runs]
            per_arm[arm] = metrics
            ttft = [x for m in metrics for x in m["ttft_ms"]]
            stages = {s: median([m["stage_median_ms"][s] for m in metrics]) for s in STAGES}
            top = max(stages, key=lambda s: -1 if math.isnan(stages[s]) else stages[s])
            row = {
                "rate": label,
                "arm": arm,
                "ttft_mean_ms": sum(ttft) / len(ttft) if ttft else math.nan,
                "ttft_median_ms": median(ttft),
                "ttft_p90_ms": percentile(ttft, 90),
                "ttft_p99_ms": percentile(ttft, 99),
                "req_per_s": sum(m["req_per_s"] for m in metrics) / len(metrics),
                "images_per_s": sum(m["images_per_s"] for m in metrics) / len(metrics),
                "tokens_per_s": sum(m["tokens_per_s"] for m in metrics) / len(metrics),
                "completed": sum(m["completed"] for m in metrics),
                "failed": sum(m["failed"] for m in metrics),
                "bytes_moved": sum(m["bytes_moved"] for m in metrics),
                "dominant_stage": top,
                **{f"{s}_ms": v for s, v in stages.items()},
            }
            rows.append(row)
        ab[label] = ab_for_rate(per_arm, opts.seed)
        for name, v in ab[label].items():
            if v.get("significant") is False:
                notes.append(
                    f"noise: at rate {label} the {name} delta's interval "
                    f"{v['ci95'][0]:+.1%}..{v['ci95'][1]:+.1%} straddles zero."
                )
    notes += stage_notes(rows)
    notes += list(opts.notes)
    notes += [f"{r['arm']} at rate {r['rate_label']}: {r['error']}" for r in runs if r.get("error")]
    if error:
        notes.append(f"run stopped early: {error}; results are partial.")
    ab_rows = [
        {
            "rate": k,
            "median_ttft_delta": v["median_ttft"]["delta"],
            "median_ttft_ci95": _fmt_ci(v["median_ttft"]["ci95"]),
            "p90_ttft_delta": v["p90_ttft"]["delta"],
            "throughput_delta": v["throughput"]["delta"],
            "throughput_ci95": _fmt_ci(v["throughput"]["ci95"]),
            "significant": v["median_ttft"]["significant"],
        }
        for k, v in ab.items()
        if v
    ]
    parts = [
        f"{r['rate']}: median TTFT {r['median_ttft_delta']:+.1%}, throughput "
        f"{r['throughput_delta']:+.1%}"
        for r in ab_rows
    ]
    verdict = ("INCOMPLETE: " + error) if error else ("deferred vs eager: " + "; ".join(parts))
    failed = sum(r["failed"] for r in rows)
    summary = {
        "verdict": verdict,
        "failed_requests": failed,
        "error": error,
        "rates": [rate_label(r) for r in opts.rates],
    }
    config = {
        "rates": [rate_label(r) for r in opts.rates],
        "requests": opts.requests,
        "images_per_request": opts.images_per_request,
        "resolution": f"{opts.resolution[0]}x{opts.resolution[1]} (width x height)",
        "ranks": opts.ranks,
        "processor_workers": opts.processor_workers,
        "transport": opts.transport,
        "arms": list(opts.arms),
        "burstiness": opts.burstiness,
        "warmup_requests": opts.warmup_requests,
        "repeats": opts.repeats,
        "image_format": opts.image_format,
        "image_content": opts.image_content,
        "unique_images": opts.unique_images,
        "request_timeout_s": opts.request_timeout_s,
        "runtime": get_profile(opts.runtime).summary(),
        "standins": vars(opts.cost),
        "standin_flops_scale_per_rank": opts.cost.scaled(device, opts.ranks),
        "preprocess": opts.cfg.summary(),
    }
    env = environment(device, opts.cfg.name, opts.seed)
    reqs = request_rows(runs)
    copies = copy_rows(runs)
    return Report(
        kind="serve-ab",
        environment=env,
        config=config,
        results=rows,
        summary=summary,
        notes=notes,
        data={"ab": ab, "requests": reqs, "copies": copies},
        views=[
            View(
                "Per rate and arm",
                rows,
                [
                    "rate",
                    "arm",
                    "ttft_median_ms",
                    "ttft_p90_ms",
                    "ttft_p99_ms",
                    "req_per_s",
                    "completed",
                    "failed",
                    "bytes_moved",
                    "dominant_stage",
                ],
            ),
            View("A/B (deferred vs eager)", ab_rows),
            View("Copies (ledger of the measured requests, per rate and arm)", copies),
        ],
    )
