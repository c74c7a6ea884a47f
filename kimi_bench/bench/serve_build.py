"""Assemble the ``serve-ab`` report (config, notes, verdict) from the per-rate tables of
``serve_report``."""

from __future__ import annotations

import math
from typing import Any

from kimi_bench.bench.serve_overhead import lateness_warnings, overhead_notes, overhead_rows
from kimi_bench.bench.serve_report import (
    base_arm,
    copy_rows,
    failure_text,
    failures,
    per_rate,
    request_rows,
    stage_notes,
)
from kimi_bench.bench.variants import (
    arm_roles,
    carrier_traits,
    decoder_config,
    recipes,
    run_decodes,
)
from kimi_bench.domain.runtime import get_profile
from kimi_bench.infra.environment import HostLoad, environment
from kimi_bench.infra.stats.format import fmt_pct
from kimi_bench.options import ServeOptions, rate_label
from kimi_bench.pipeline import arms as arm_objects
from kimi_bench.report import Report, verdicts


def endpoint_arms(opts: ServeOptions) -> tuple[str, ...]:
    """The arms: the endpoint names with --endpoint, else the emulated arms."""
    return tuple(e.partition("=")[0] for e in opts.endpoints) or tuple(opts.arms)


def _endpoint_notes(opts: ServeOptions) -> list[str]:
    arms = endpoint_arms(opts)
    notes = [
        f"external OpenAI-compatible servers ({', '.join(arms)}): the same seeded trace "
        "(arrivals, images, prompt) is streamed to each; TTFT = first streamed content token "
        "at the client - time the request was sent. Throughput = completed requests / (last "
        "first token - trace start). Warm-up requests excluded. No per-stage times or copy "
        "ledger (a third-party server does not report them).",
        "A request counts as completed only when its stream finished (a finish_reason or "
        "[DONE]); a stream that stops early is failed (truncated). HTTP 429 is a failed "
        + (
            f"request after {opts.retry_429} retries honouring Retry-After"
            if opts.retry_429
            else "request (no retry; --retry-429 N retries)"
        )
        + f"; --request-timeout {opts.request_timeout_s:g} s bounds each request end to end.",
        "TTFT intervals resample requests (each request of a server that reports no batches "
        "is one unit; requests of one batch are one unit when the server reports batches); "
        "throughput intervals resample repeats; repeats alternate the order of the arms.",
    ]
    if len(arms) > 1:
        notes.append(f"A/B: each endpoint vs the first, {arms[0]} (signed %, arm minus "
                     f"{arms[0]}).")  # fmt: skip
    else:
        notes.append(f"one endpoint ({arms[0]}): a plain benchmark, no A/B.")
    return notes


def _notes(opts: ServeOptions, device: Any, profile: str) -> list[str]:
    import torch

    if opts.endpoints:
        return _endpoint_notes(opts)
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
    for a in arm_objects(opts.arms):
        if a.encoded_inputs:
            notes.append(
                f"{a.name} is a PROPOSED arm, {a.label}: its producers read only each image's "
                "header (the decode stage) and ship the encoded bytes; each owner decodes its "
                "images inside the step, after scheduling (a decode error then fails its "
                "request there, not at the producer)."
            )
        elif a.proposed:
            notes.append(f"{a.name} is PROPOSED, {a.label}.")
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


def _one_arm(rows: list[dict[str, Any]]) -> str:
    parts = [
        f"{r['rate']}: {r['arm']} median TTFT {r['ttft_median_ms']:.1f} ms, "
        f"{r['req_per_s']:.3g} req/s, {r['completed']} completed"
        for r in rows
        if r["completed"]
    ]
    return "one arm (no A/B): " + ("; ".join(parts) or "no completed request")


def _verdict(
    ab: dict[str, Any],
    error: str | None,
    cpu: bool,
    base: str = "eager",
    failed: list[str] | None = None,
    single: str | None = None,
) -> str:
    if error:
        return "INCOMPLETE: " + error + ("; " + "; ".join(failed) if failed else "")
    parts = []
    for label, arms in ab.items():
        for arm, v in arms.items():
            arm = arm.replace("_vs_", " vs ")
            med = v["median_ttft"]
            if failed and med.get("b_units") == 0:
                continue  # an arm with no completed request: named in FAILED REQUESTS
            sig = "" if med["significant"] else f" ({med['verdict']})"
            parts.append(
                f"{label}: {arm} median TTFT {fmt_pct(med['delta_pct'])}{sig}, throughput "
                f"{fmt_pct(v['throughput'].get('delta_pct'))}"
            )
    text = f"vs {base}: " + "; ".join(parts) if parts else (single or "no A/B (one arm)")
    if failed:
        text = "FAILED REQUESTS: " + "; ".join(failed) + ". " + text
    return text + (" [CPU: does not predict GPU behaviour]" if cpu else "")


def _data(
    ab: dict[str, Any], runs: list[dict[str, Any]], overhead: list[dict[str, Any]]
) -> dict[str, Any]:
    """The report's raw blocks (its tables are ``report.tables``, read from these)."""
    data: dict[str, Any] = {"ab": ab, "requests": request_rows(runs), "copies": copy_rows(runs)}
    if overhead:
        data["client_overhead"] = overhead
    return data


def build_serve_report(
    opts: ServeOptions,
    runs: list[dict[str, Any]],
    device: Any,
    error: str | None,
    profile: str = "cpu",
    load_start: HostLoad | None = None,
) -> Report:
    recipe = recipes(runs)
    decodes = run_decodes(runs)
    names = endpoint_arms(opts)
    if opts.endpoints and tuple(opts.arms) != names:
        opts = opts.model_copy(update={"arms": names})
    rows, ab = per_rate(opts, runs)
    notes = _notes(opts, device, profile)
    failed = [failure_text(a, f) for a, f in failures(runs).items() if f["failed"]]
    for label, arms in ab.items():
        for arm, v in arms.items():
            if not v["median_ttft"]["significant"]:
                notes.append(
                    f"rate {label}, {arm}: median TTFT delta not significant: "
                    f"{v['median_ttft']['verdict']}."
                )
    notes += stage_notes(rows, base_arm(list(names), bool(opts.endpoints))) + list(opts.notes)
    notes += [f"{r['arm']} at rate {r['rate_label']}: {r['error']}" for r in runs if r.get("error")]
    overhead = overhead_rows(runs)  # HTTP runs only
    warnings = lateness_warnings(overhead)
    notes += overhead_notes(overhead, runs) + warnings
    if error:
        notes.append(f"run stopped early: {error}; results are partial.")
    env = environment(device, opts.preset, opts.seed, load_start=load_start,
                      metadata=dict(opts.metadata))  # fmt: skip
    if env["host_load"].get("warning"):
        notes.append(env["host_load"]["warning"])
    external = bool(opts.endpoints)
    summary = {
        "verdict": _verdict(
            ab,
            error,
            device.type == "cpu" and not external,
            base_arm(list(names), external),
            failed if external else None,
            _one_arm(rows) if external else None,
        ),
        "failed_requests": sum(r["failed"] for r in rows),
        "error": error,
        "rates": [rate_label(r) for r in opts.rates],
        "arms": list(names),
    }
    if external:
        summary["failures"] = failures(runs)
    if warnings:
        summary["client_warnings"] = warnings
    config = opts.model_dump(mode="json", exclude={"fault_hooks"}) | {  # a test seam, not a setting
        "rates": [None if math.isinf(r) else r for r in opts.rates],  # null = unlimited
        "rate_labels": [rate_label(r) for r in opts.rates],
        "width": opts.width_height[0],
        "height": opts.width_height[1],
        "defaults_profile": profile,
        "runtime_profile": get_profile(opts.runtime).summary(),
        "arm_roles": {"baseline": names[0], "change": names[1] if len(names) > 1 else None}
        if external
        else arm_roles(names),
    }
    if not external:  # the emulator's carrier and decoder (a real server's are its own)
        config["carrier_traits"] = carrier_traits(opts.transport)
        config["decoding"] = decoder_config(opts.decoder, opts.runtime, device)
    sources = {r["arm"]: r.get("source") for r in runs if r.get("source")}
    config["arm_sources"] = sources
    data = _data(ab, runs, overhead)
    if recipe:
        data = {"recipe": recipe, **data}
    if any(decodes.values()):
        data["decodes"] = decodes
    report = Report(
        kind="serve-ab",
        environment=env,
        config=config,
        results=rows,
        summary=summary,
        notes=notes,
        data=data,
    )
    # the verdict in the words every format prints it (report.verdicts), from the data
    summary["verdict"] = verdicts.text(verdicts.lines(report.to_dict()))
    return report
