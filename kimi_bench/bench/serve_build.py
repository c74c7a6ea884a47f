"""Assemble the ``serve-ab`` report (config, notes, verdict) from the per-rate tables of
``serve_report``."""

from __future__ import annotations

import math
from typing import Any

from kimi_bench.bench.serve_report import ab_rows, copy_rows, per_rate, request_rows, stage_notes
from kimi_bench.environment import HostLoad, environment
from kimi_bench.options import ServeOptions, rate_label
from kimi_bench.report import Report, View
from kimi_bench.runtime import get_profile
from kimi_bench.stats import fmt_pct

COLUMNS = ["rate", "arm", "ttft_median_ms", "ttft_p90_ms", "ttft_p99_ms", "req_per_s",
           "completed", "failed", "forward_batches", "bytes_moved", "dominant_stage"]  # fmt: skip


def _notes(opts: ServeOptions, device: Any, profile: str) -> list[str]:
    import torch

    c = opts.standins
    notes = [
        "The vision encoder and the prefill are STAND-INS (matmul chains sized by patch and "
        f"token counts: {c.encoder_gflop_per_patch} GFLOP/patch, {c.prefill_gflop_per_token} "
        f"GFLOP/token split over {opts.ranks} ranks), not the model; the gather carries "
        "metadata only. TTFT ends at the first token after prefill; there is no decode.",
        "TTFT = first token time - time the request was sent. Throughput = completed "
        "requests / (last first token - trace start). Warm-up requests excluded. TTFT "
        "intervals resample forward batches (requests served together are one unit); "
        "throughput intervals resample repeats.",
        f"defaults: the {profile.upper()} profile ({opts.ranks} ranks, {opts.requests} "
        f"requests per rate and arm, {opts.width_height[0]}x{opts.width_height[1]} "
        "width x height).",
        f"runtime profile {opts.runtime}: {get_profile(opts.runtime).description}; the "
        "copies table is the ledger of every pixel-byte move of the measured requests.",
    ]
    if "zero-copy" in opts.arms:
        notes.append("zero-copy is a PROPOSED transport, not in the runtime.")
    if device.type == "cpu":
        notes.append(
            f"CPU only: stand-in FLOPs scaled by {c.cpu_flops_scale}; the device is emulated "
            "in host memory (each H2D/D2H is a host copy here). CPU timings do not predict "
            "GPU behaviour."
        )
    elif torch.cuda.device_count() < (opts.ranks or 1):
        gpus = torch.cuda.device_count()
        notes.append(
            f"{opts.ranks} ranks share {gpus} GPU(s): each rank's stand-in FLOPs are scaled "
            f"by {gpus}/{opts.ranks} so that stand-in device time per step matches "
            f"{opts.ranks} ranks on {opts.ranks} GPUs; host-to-device copies of all ranks "
            "still share one PCIe link."
        )
    return notes


def _verdict(ab: dict[str, Any], error: str | None, cpu: bool) -> str:
    if error:
        return "INCOMPLETE: " + error
    parts = []
    for label, arms in ab.items():
        for arm, v in arms.items():
            arm = arm.replace("_vs_", " vs ")
            med = v["median_ttft"]
            sig = "" if med["significant"] else f" ({med['verdict']})"
            parts.append(
                f"{label}: {arm} median TTFT {fmt_pct(med['delta_pct'])}{sig}, throughput "
                f"{fmt_pct(v['throughput'].get('delta_pct'))}"
            )
    text = "vs eager: " + "; ".join(parts) if parts else "no A/B (one arm)"
    return text + (" [CPU: does not predict GPU behaviour]" if cpu else "")


def build_serve_report(
    opts: ServeOptions,
    runs: list[dict[str, Any]],
    device: Any,
    error: str | None,
    profile: str = "cpu",
    load_start: HostLoad | None = None,
) -> Report:
    rows, ab = per_rate(opts, runs)
    notes = _notes(opts, device, profile)
    for label, arms in ab.items():
        for arm, v in arms.items():
            if not v["median_ttft"]["significant"]:
                notes.append(
                    f"rate {label}, {arm}: median TTFT delta not significant: "
                    f"{v['median_ttft']['verdict']}."
                )
    notes += stage_notes(rows) + list(opts.notes)
    notes += [f"{r['arm']} at rate {r['rate_label']}: {r['error']}" for r in runs if r.get("error")]
    if error:
        notes.append(f"run stopped early: {error}; results are partial.")
    env = environment(device, opts.preset, opts.seed, load_start=load_start,
                      metadata=dict(opts.metadata))  # fmt: skip
    if env["host_load"].get("warning"):
        notes.append(env["host_load"]["warning"])
    summary = {
        "verdict": _verdict(ab, error, device.type == "cpu"),
        "failed_requests": sum(r["failed"] for r in rows),
        "error": error,
        "rates": [rate_label(r) for r in opts.rates],
        "arms": list(opts.arms),
    }
    config = opts.model_dump(mode="json") | {
        "rates": [None if math.isinf(r) else r for r in opts.rates],  # null = unlimited
        "rate_labels": [rate_label(r) for r in opts.rates],
        "width": opts.width_height[0],
        "height": opts.width_height[1],
        "defaults_profile": profile,
        "runtime_profile": get_profile(opts.runtime).summary(),
    }
    sources = {r["arm"]: r.get("source") for r in runs if r.get("source")}
    config["arm_sources"] = sources
    external = [a for a, src in sources.items() if (src or {}).get("kind") == "external"]
    if external:
        notes.append(
            f"external servers ({', '.join(external)}): TTFT is the first streamed content "
            "token at the client; no per-stage times or copy ledger (the stand-in notes apply "
            "to emulated arms only)."
        )
    reqs, copies, abr = request_rows(runs), copy_rows(runs), ab_rows(ab)
    return Report(
        kind="serve-ab",
        environment=env,
        config=config,
        results=rows,
        summary=summary,
        notes=notes,
        data={"ab": ab, "requests": reqs, "copies": copies},
        views=[
            View("Per rate and arm", rows, COLUMNS),
            View("A/B (each arm vs eager; signed %, arm minus eager)", abr),
            View("Copies (ledger of the measured requests, per rate and arm)", copies),
        ],
    )
