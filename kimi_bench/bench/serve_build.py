"""Assemble the ``serve-ab`` report (config, notes, verdict) from the per-rate tables of
``serve_report``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kimi_bench.bench.serve_notes import emulator_notes, endpoint_arms, serving_notes
from kimi_bench.bench.serve_overhead import lateness_warnings, overhead_notes, overhead_rows
from kimi_bench.bench.serve_report import (
    base_arm,
    copy_rows,
    failures,
    per_rate,
    request_rows,
    stage_notes,
)
from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.bench.serve_types import Versus
from kimi_bench.bench.variants import (
    arm_roles,
    carrier_traits,
    decoder_config,
    recipes,
    run_decodes,
)
from kimi_bench.domain.runtime import get_profile
from kimi_bench.infra.environment import HostLoad, environment
from kimi_bench.options import ServeOptions, rate_label
from kimi_bench.report import Report, verdicts


def _one_arm(rows: Sequence[dict[str, Any]], arms: Sequence[str]) -> str:
    parts = [
        f"{r['rate']}: {r['arm']} median TTFT {r.get('ttft_median_ms', math.nan):.1f} ms, "
        f"{r['req_per_s']:.3g} req/s, {r['completed']} completed"
        for r in rows
        if r["completed"]
    ]
    done = {r["arm"] for r in rows if r["completed"]}
    empty = [a for a in arms if a not in done]
    if len(arms) > 1 and empty:
        head = f"no A/B: {', '.join(empty)} completed no request"
        return head + ("; " + "; ".join(parts) if parts else "")
    return "one arm (no A/B): " + ("; ".join(parts) or "no completed request")


def build_serve_report(
    opts: ServeOptions,
    runs: Sequence[ServeRun],
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
    table = per_rate(opts, runs)
    rows, ab = table.rows, table.ab
    requests = request_rows(runs)
    notes = emulator_notes(opts, device, profile) + _not_significant(ab)
    by_arm = failures(runs)
    notes += stage_notes(rows, base_arm(list(names), bool(opts.endpoints))) + list(opts.notes)
    notes += [f"{r.arm} at rate {r.rate_label}: {r.error}" for r in runs if r.error]
    overhead = overhead_rows(runs)  # HTTP runs only
    serving = serving_notes(opts, runs, requests)
    warnings = lateness_warnings(overhead) + serving.warnings
    notes += overhead_notes(overhead, runs) + serving.notes + warnings
    if error:
        notes.append(f"run stopped early: {error}; results are partial.")
    env = environment(device, opts.preset, opts.seed, load_start=load_start,
                      metadata=dict(opts.metadata))  # fmt: skip
    if env["host_load"].get("warning"):
        notes.append(env["host_load"]["warning"])
    external = bool(opts.endpoints)
    summary = {
        # what the verdict lines say without an A/B (replaced by them below)
        "verdict": f"INCOMPLETE: {error}" if error else _one_arm(rows, names),
        "failed_requests": sum(r["failed"] for r in rows),
        "error": error,
        "rates": [rate_label(r) for r in opts.rates],
        "arms": list(names),
    }
    if external:
        summary["failures"] = {arm: vars(f) for arm, f in by_arm.items()}
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
    config["arm_sources"] = {r.arm: r.source for r in runs if r.source}
    data: dict[str, Any] = {"ab": ab, "requests": requests, "copies": copy_rows(runs)}
    if overhead:
        data["client_overhead"] = [o.as_row() for o in overhead]
    if serving.profiles:
        data["profiles"] = serving.profiles
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


def _not_significant(ab: dict[str, dict[str, Versus]]) -> list[str]:
    """A note per rate and arm whose median TTFT delta is not significant, and why."""
    return [
        f"rate {label}, {arm}: median TTFT delta not significant: {v['median_ttft']['verdict']}."
        for label, arms in ab.items()
        for arm, v in arms.items()
        if not v["median_ttft"]["significant"]
    ]
