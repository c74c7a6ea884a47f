"""Assemble the ``serve-ab`` report (config, notes, verdict) from the per-rate tables of
``serve_report``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kimi_bench.bench.serve_capacity import capacity_notes, capacity_rows
from kimi_bench.bench.serve_notes import run_notes
from kimi_bench.bench.serve_overhead import (
    Overhead,
    lateness_warnings,
    overhead_notes,
    overhead_rows,
)
from kimi_bench.bench.serve_report import ServePart, base_arm, serve_part
from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.bench.serve_traffic import (
    annotate_rows,
    cache_flush_notes,
    traffic_data,
    traffic_notes,
)
from kimi_bench.bench.variants import recipes, run_decodes, variant_config
from kimi_bench.domain.ledger import hash_and_cache, hash_and_cache_notes
from kimi_bench.domain.runtime import get_profile
from kimi_bench.infra.environment import HostLoad, environment
from kimi_bench.options import ServeOptions, rate_label
from kimi_bench.report import verdicts
from kimi_bench.report.model import Report
from kimi_bench.serving.workload import Workload


def build_serve_report(
    opts: ServeOptions,
    runs: Sequence[ServeRun],
    device: Any,
    error: str | None,
    profile: str = "cpu",
    load_start: HostLoad | None = None,
    workload: Workload | None = None,
    capacity: dict[str, Any] | None = None,
) -> Report:
    names = opts.arm_names
    if opts.endpoints and tuple(opts.arms) != names:
        opts = opts.model_copy(update={"arms": names})
    config = _config(opts, names, runs, device, profile)
    part = serve_part(opts, runs, names)
    rows = part.rows
    base = base_arm(list(names), bool(opts.endpoints))  # what the others are compared with
    said = run_notes(opts, device, profile, runs, part, base)
    serving = said.serving
    overhead = overhead_rows(runs)  # HTTP runs only
    warnings = lateness_warnings(overhead) + serving.warnings
    overhead_said = overhead_notes(overhead, runs)
    env = environment(device, opts.preset, opts.seed, load_start=load_start,
                      metadata=dict(opts.metadata))  # fmt: skip
    notes = [*said.emulator, *said.saturated, *said.not_significant, *said.stages, *opts.notes]
    notes += [f"{r.arm} at rate {r.rate_label}: {r.error}" for r in runs if r.error]
    notes += cache_flush_notes(runs, bool(opts.endpoints))
    notes += [
        f"rate {row['rate']}: {row['arm']} was interrupted ({row['interrupted']} planned "
        "request(s) never sent or cut off in flight: not failures); not compared"
        for row in rows
        if row.get("interrupted") is not None
    ]
    notes += overhead_said + serving.notes + warnings
    if error:
        notes.append(f"run stopped early: {error}; results are partial.")
    if env["host_load"].get("warning"):
        notes.append(env["host_load"]["warning"])
    summary = {
        # what the verdict lines say without an A/B (replaced by them below)
        "verdict": f"INCOMPLETE: {error}" if error else said.one_arm,
        "failed_requests": sum(r["failed"] for r in rows),
        "error": error,
        "rates": [rate_label(r) for r in opts.rates],
        "arms": list(names),
    }
    if opts.endpoints:
        summary["failures"] = {arm: vars(f) for arm, f in part.failures.items()}
    elif part.copies:  # the emulated producers' preprocess cache and feature hash, per run
        summary["hash_and_cache"] = serve_hash_and_cache(opts, part.copies)
        own = (
            "; each producer has its own cache"
            if get_profile(opts.runtime_spec).preprocess_cache
            else ""
        )
        notes += hash_and_cache_notes(summary["hash_and_cache"], "every request of the run" + own)
    if warnings:
        summary["client_warnings"] = warnings
    data, data_said = _data(opts, runs, part, workload, capacity, overhead, serving.profiles)
    notes += data_said
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


def _data(
    opts: ServeOptions,
    runs: Sequence[ServeRun],
    part: ServePart,
    workload: Workload | None,
    capacity: dict[str, Any] | None,
    overhead: list[Overhead],
    profiles: dict[str, list[str]],
) -> tuple[dict[str, Any], list[str]]:
    """``data`` (the A/B blocks, the requests and copies, the traffic, the capacity search,
    the client overhead, the profiles, the recipes and decodes) and the notes on the
    traffic and the capacity search; ``part.rows`` gain their traffic columns."""
    rows = part.rows
    data: dict[str, Any] = {"ab": part.ab, "requests": part.requests, "copies": part.copies}
    annotate_rows(rows, opts, part.requests)
    data |= traffic_data(part.requests, workload)
    notes = traffic_notes(opts, rows, data)
    if capacity is not None:
        data |= {"capacity": capacity, "capacity_rows": capacity_rows(capacity)}
        notes += capacity_notes(capacity)
    if overhead:
        data["client_overhead"] = [o.as_row() for o in overhead]
    if profiles:
        data["profiles"] = profiles
    recipe, decodes = recipes(runs), run_decodes(runs)
    if recipe:
        data = {"recipe": recipe, **data}
    if any(decodes.values()):
        data["decodes"] = decodes
    return data, notes


def _config(
    opts: ServeOptions, names: Sequence[str], runs: Sequence[ServeRun], device: Any, profile: str
) -> dict[str, Any]:
    """``config``: the options as given and what they resolved to; the emulator's carrier
    and decoder (a real server's are its own); where each arm's answers came from."""
    ext = bool(opts.endpoints)  # the endpoints: the first is the baseline, the second the change
    roles = {"baseline": names[0], "change": names[1] if len(names) > 1 else None}
    variants = variant_config(
        names, opts.runtime_spec, carrier_name=None if ext else opts.transport,
        decoder=None if ext else opts.decoder, device=device, roles=roles if ext else None,
    )  # fmt: skip
    config = opts.model_dump(mode="json", exclude={"fault_hooks"}) | {  # a test seam, not a setting
        "rates": [None if math.isinf(r) else r for r in opts.rates],  # null = unlimited
        "rate_labels": [rate_label(r) for r in opts.rates],
        "width": opts.width_height[0],
        "height": opts.width_height[1],
        "defaults_profile": profile,
        **variants,
    }
    config["arm_sources"] = {r.arm: r.source for r in runs if r.source}
    return config


def serve_hash_and_cache(opts: ServeOptions, copies: Sequence[Any]) -> dict[str, Any]:
    """Per ``rate/arm`` (every request of the run, summed): the preprocess cache's hits and
    misses and the bytes the producers' feature hash read and copied."""
    cache_on = get_profile(opts.runtime_spec).preprocess_cache
    keys = dict.fromkeys(f"{c['rate']}/{c['arm']}" for c in copies)
    return {
        k: hash_and_cache([c for c in copies if f"{c['rate']}/{c['arm']}" == k], cache_on)
        for k in keys
    }
