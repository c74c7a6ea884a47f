"""The notes of micro's report: what the run was (input, defaults, runtime profile, the
arms and the carrier), what its speedups rest on (launches), the zero-copy arm's start-up
and the ``--profile`` traces; ``report_notes`` puts them in the report's order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kimi_bench.bench import micro_control as mc
from kimi_bench.bench import micro_report as mr
from kimi_bench.bench.micro_records import Ratio
from kimi_bench.bench.micro_setup import scan_images
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.runtime import get_profile
from kimi_bench.engine.images import describe_spec
from kimi_bench.engine.micro_messages import Floor
from kimi_bench.infra.stats.launches import PREDICTION
from kimi_bench.options import MicroOptions
from kimi_bench.pipeline import arms, carrier
from kimi_bench.report.model import Report


def report_notes(
    opts: MicroOptions,
    cfg: PreprocessConfig,
    dev: Any,
    profile: str,
    part: mr.ArmsPart,
    ctl: mc.ControlPart,
    env: dict[str, Any],
    floor: Floor,
    error: str | None,
    leftovers: list[str],
    decode_said: list[str],
) -> list[str]:
    """The report's notes, in order, up to the hash-and-cache notes (which read the
    summary)."""
    notes = [*run_notes(opts, cfg, dev, profile), *launch_notes(part.speed, opts.launches),
             *part.time_notes, *opts.notes]  # fmt: skip
    if env["host_load"].get("warning"):
        notes.append(env["host_load"]["warning"])
    notes += zero_copy_notes(floor) + part.floor_notes + ctl.notes
    if error:
        notes.append(f"run stopped early: {error}; results are partial.")
    if leftovers:
        notes.append(f"removed {len(leftovers)} leftover shared-memory segment(s) after the run")
    notes += decode_said
    return notes


def run_notes(opts: MicroOptions, cfg: PreprocessConfig, dev: Any, profile: str) -> list[str]:
    import torch

    notes = [
        (
            f"input: the images in {opts.images}"
            if opts.images
            else f"input: {describe_spec(opts.groups)} ({opts.content} content)"
        )
        + f", preset {cfg.name}.",
        *skipped_notes(opts),
        f"defaults: the {profile.upper()} profile ({opts.ranks} ranks; {opts.launches} "
        f"launch(es), each with fresh processes, {opts.repeats} repeats after {opts.warmup} "
        "warm-up).",
        "stages follow the critical path: each stage ends when the slowest rank finished it; "
        "stage times add up to the total. Speedups pair the arms per repeat.",
        f"runtime profile {opts.runtime_spec}: {get_profile(opts.runtime).description}. The copy "
        "ledger (copies) lists every operation that moved pixel bytes, per arm and stage.",
        runtime_hash_note(opts.runtime_spec, opts.repeat_share),
    ]
    for a in arms(opts.arms):
        if a.proposed:
            notes.append(f"{a.name} is PROPOSED, {a.label}" + (
                ": every arm of this run received encoded images." if a.encoded_inputs else "."
            ))  # fmt: skip
    if (note := carrier(opts.transport).note()) is not None:
        notes.append(note)
    if dev.type == "cpu":
        notes.append(
            "no CUDA: the device is emulated in host memory; each H2D/D2H of the runtime is "
            "a host copy of the same bytes here (ledger entries say so), in the floor too. "
            "CPU timings do not predict GPU behaviour."
        )
    elif torch.cuda.device_count() < (opts.ranks or 1):
        notes.append(
            f"{opts.ranks} ranks share {torch.cuda.device_count()} GPU(s) round robin; "
            "their device copies contend for the same PCIe link."
        )
    return notes


def runtime_hash_note(spec: str, repeat_share: float) -> str:
    """What the profile does about the feature hash and the preprocess cache."""
    p = get_profile(spec)
    where = {
        "artifact": "every cache miss's feature is hashed at the producer (_make_artifact)",
        "pad_value": "every feature is hashed at the producer (set_pad_value)",
        "none": "no feature is hashed (the identity is the content digest)",
    }[p.feature_hash]
    cache = p.summary()["preprocess_cache"]
    return (
        f"feature hash and preprocess cache ({p.spec}): {where}; preprocess cache {cache}; "
        f"{repeat_share:.0%} of the request's images repeat an earlier one (--repeat-share)."
    )


def skipped_notes(opts: MicroOptions) -> list[str]:
    """One note per file of --images left out (the run used the others)."""
    if not opts.images:
        return []
    try:
        skipped = scan_images(opts.images)[1]
    except ValueError:
        return []
    return [f"skipped {line}" for line in skipped]


def launch_notes(speed: dict[str, Ratio], launches: int) -> list[str]:
    """How many launches the speedups rest on, what their interval promises and which
    level (between launches or within them) dominates the spread of each median."""
    out = []
    for key, m in speed.items():
        sp, iv = m.get("spread"), m["interval"]
        if not sp:
            continue
        if iv["kind"] != PREDICTION:
            out.append(f"{key}: {iv['reason'] or 'no re-run interval'}.")
            continue
        meds = ", ".join(f"{v:.3g}" for v in sp["launch_medians"])
        out.append(
            f"{key}: the interval is a 95% prediction interval for a re-run's median "
            f"({sp['launches']} launches, {sp['samples']} repeats; launch medians {meds}); "
            f"the spread of the median is {sp['between_share']:.0%} between launches: "
            f"{sp['dominant']} dominate."
        )
    if launches > 1 and not out:
        out.append(f"{launches} launches asked for; no speedup to rest on them.")
    return out


def name_profiles(report: Report, opts: MicroOptions) -> None:
    """``--profile``: the traces written, in the report's data and notes (none written: said)."""
    if opts.profile is None:
        return
    names = ["producer", *(f"rank{r}" for r in range(opts.ranks or 1))]  # what this run wrote
    traces = [str(t) for n in names if (t := opts.profile / f"{n}.trace.json").is_file()]
    report.data["profiles"] = traces
    named = ", ".join(Path(t).name for t in traces) or "none written"
    report.notes.append(
        f"torch profiler traces (Chrome trace JSON; stages as stage:<name> ranges) of the "
        f"producer and each rank under {opts.profile}/: {named}; from {opts.profile_repeats} "
        f"extra repeat(s) of every arm after the measured ones, not in the statistics."
    )


def zero_copy_notes(floor: Floor) -> list[str]:
    """The zero-copy arm's one-time start-up (arena map and CUDA registration per rank):
    measured once, reported apart from the per-request stages."""
    setup = [s for s in floor.get("zero_copy_setup") or [] if s]
    if not setup:
        return []
    reg = [s["register_ms"] or 0.0 for s in setup if s.get("registered")]
    mapped = max(s.get("map_ms") or 0.0 for s in setup)
    what = (
        f"cudaHostRegister {max(reg):.2f} ms (slowest rank)"
        if reg
        else "no CUDA registration (CPU run)"
    )
    return [
        f"zero-copy start-up, once per run and not in any stage: arena of "
        f"{setup[0]['arena_bytes']:,} B in {setup[0]['slots']} slots; map {mapped:.2f} ms; "
        f"{what}."
    ]
