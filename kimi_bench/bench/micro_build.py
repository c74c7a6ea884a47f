"""``micro``: where do the milliseconds and bytes go, stage by stage, per arm, with a real
producer process and real gloo ranks? Options: ``kimi_bench.options.MicroOptions``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kimi_bench.bench import micro_control as mc
from kimi_bench.bench import micro_report as mr
from kimi_bench.bench.micro_decode import decode_part
from kimi_bench.bench.micro_notes import name_profiles, report_notes
from kimi_bench.bench.micro_records import (
    MedianTimeline,
    Repeat,
    Samples,
    TimelineLane,
    TimelineSpan,
)
from kimi_bench.bench.variants import decode_counts, variant_config
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.ledger import Ledger, hash_and_cache, hash_and_cache_notes
from kimi_bench.domain.runtime import get_profile
from kimi_bench.engine.images import describe_spec
from kimi_bench.engine.launch import LaunchConfig
from kimi_bench.engine.micro_messages import Floor, RankMarks, RepeatMessage
from kimi_bench.infra.environment import HostLoad, environment
from kimi_bench.options import MicroOptions
from kimi_bench.pipeline import STAGES, arm, recipe_record, with_role
from kimi_bench.report import verdicts
from kimi_bench.report.model import Report
from kimi_bench.results.micro_figures import stated_figures


class MicroFailed(RuntimeError):
    """The run stopped early; ``report`` holds what was measured until then."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


# the stages the producer marks (its lane of the timeline); the ranks' marks follow
PRODUCER_STAGES = STAGES[: STAGES.index("serialize") + 1]


def stage_record(rec: RepeatMessage) -> Repeat:
    """One repeat's marks -> stage durations (ms) on the critical path (each stage ends
    when the slowest rank finished it), the merged copy ledger (producer + every rank) and
    the bit-exactness flags."""
    ranks = rec["ranks"]
    prod = ranks[0]["producer"]
    assert prod is not None, "rank 0 forwards the producer's marks"
    pm = prod["marks"]
    bounds = [pm["start"], *(pm[s] for s in PRODUCER_STAGES), ranks[0]["marks"]["to_rank0"]]
    bounds += [max(r["marks"][s] for r in ranks) for s in STAGES[len(PRODUCER_STAGES) + 1 :]]
    timeline = _timeline(pm, ranks, bounds[0])
    ledger = Ledger().merge(prod["ledger"])
    for r in ranks:
        ledger.merge(r["ledger"])
    by_stage = ledger.by_stage()
    other = arm(rec["arm"]).role != "baseline"
    return Repeat(
        timeline=timeline,
        stage_ms={s: (bounds[i + 1] - bounds[i]) * 1e3 for i, s in enumerate(STAGES)},
        stage_bytes={s: by_stage.get(s, 0) for s in STAGES},
        total_ms=(bounds[-1] - bounds[0]) * 1e3,
        copies=ledger.rows(),
        decisions=prod["decisions"],
        bit_exact=all(r["bit_exact"] for r in ranks) if other else None,
        bit_exact_fp32=all(r["bit_exact_fp32"] for r in ranks) if other else None,
        owner_decode_ms=max(r["owner_decode_ms"] for r in ranks),
        recipe=recipe_record(prod["recipe"], ranks[0]["recipe"]),
        decodes=[*prod["decodes"], *(d for r in ranks for d in r["decodes"])],
    )


def _timeline(pm: dict[str, float], ranks: list[RankMarks], t0: float) -> list[TimelineLane]:
    """One repeat per lane (ms from its start, one clock): the producer's stages, then each
    rank's own marks from the broadcast on, so the figure shows which rank is last."""
    ms = lambda t: (t - t0) * 1e3  # noqa: E731
    spans: list[TimelineSpan] = []
    prev = pm["start"]
    for s in PRODUCER_STAGES:
        spans.append(TimelineSpan(stage=s, start_ms=ms(prev), end_ms=ms(pm[s])))
        prev = pm[s]
    lanes = [TimelineLane(lane="producer", spans=spans)]
    for r, sent in enumerate(ranks):
        marks = sent["marks"]
        prev = ranks[0]["marks"]["to_rank0"] if r else pm["serialize"]
        spans = []
        for s in STAGES[len(PRODUCER_STAGES) :]:
            if s in marks:
                spans.append(TimelineSpan(stage=s, start_ms=ms(prev), end_ms=ms(marks[s])))
                prev = marks[s]
        lanes.append(TimelineLane(rank=r, spans=spans))
    return lanes


def _take_recipes(
    samples: Samples, control: Samples | None
) -> tuple[dict[str, Any], dict[str, Any], Samples]:
    """The recipe and the decodes of each arm's repeats, taken off the records (``control``:
    its records' are dropped; None: no control rounds)."""
    recipe = {arm: _pop_first(recs, "recipe") for arm, recs in samples.items() if recs}
    raw_decodes = {arm: _pop_first(recs, "decodes") for arm, recs in samples.items()}
    control = control or {}
    for recs in control.values():
        _pop_first(recs, "recipe")
        _pop_first(recs, "decodes")
    return recipe, raw_decodes, control


def _pop_first(recs: list[Repeat], key: str) -> Any:
    """What every repeat record carried under ``key`` (the same in every repeat: the
    recipe, the decodes), taken off the records: the first one."""
    values = [r.pop(key, None) for r in recs]  # type: ignore[misc]
    return next((v for v in values if v), {})


@dataclass(frozen=True)
class Launched:
    """How the processes of a run were started, for its report: ``config.launch``, the
    run's shared-memory prefix and the prefixes of a runtime carrier's own segments."""

    config: LaunchConfig
    shm_prefix: str
    runtime_prefixes: list[str]


def build_report(
    opts: MicroOptions,
    cfg: PreprocessConfig,
    dev: Any,
    samples: Samples,
    floor: Floor,
    error: str | None,
    leftovers: list[str],
    profile: str = "cpu",
    load_start: HostLoad | None = None,
    control: Samples | None = None,
    launched: Launched | None = None,
) -> Report:
    """The report; ``control``: the control rounds' records per arm (the same shape as
    ``samples``), from which each arm's payload cost is derived (``micro_control``)."""
    recipe, raw_decodes, control = _take_recipes(samples, control)
    names: list[str] = list(opts.arms)
    desc, floor_ms = _control_desc(cfg, control), floor.get("floor_ms")
    part = mr.arms_part(samples, control, floor, names, error)
    section = mc.control_section(
        samples, control, part.control_arms, list(part.speed), floor_ms, desc
    )
    ctl = mc.control_part(section, opts.control_repeats, names)
    totals = {a: f.total for a, f in part.derived.arms.items()}
    decode, decode_said = decode_part(samples, totals)  # the deferred-decode arm, when it ran
    env = environment(
        dev, cfg.name, opts.seed, load_start=load_start, metadata=dict(opts.metadata),
        clock="time.perf_counter (CLOCK_MONOTONIC) after torch.cuda.synchronize, floor "
        "too; the pinned link rate with CUDA events",
    )  # fmt: skip
    notes = report_notes(
        opts, cfg, dev, profile, part, ctl, env, floor, error, leftovers, decode_said
    )
    summary = _summary(part, floor_ms, error, opts, samples) | ctl.summary
    notes += hash_and_cache_notes(summary["hash_and_cache"])
    timeline = {arm: _median_timeline(recs) for arm, recs in samples.items() if recs}
    report = Report(
        kind="micro",
        environment=env,
        config=_config(opts, cfg, dev, profile),
        results=[dict(r) for r in part.rows],  # the envelope's JSON rows
        summary=summary,
        notes=notes,
        data={"recipe": recipe,
              "decodes": {arm: decode_counts(d) for arm, d in raw_decodes.items()},
              "arms": part.arms, "speedups": part.speed,
              "speedup": part.speed.get(_headline(opts.arms)),
              "timeline": timeline, "deferred_decode": decode,
              "floor": floor, "floor_ms": floor_ms, "repeats": samples,
              "control": ctl.section, "control_repeats": control},
    )  # fmt: skip
    exact = part.exact
    if not error and exact and all(exact):  # an INCOMPLETE or MISMATCH verdict stays as is
        summary["verdict"] = verdicts.text(verdicts.lines(report.to_dict()))
    if launched is not None:
        report.data["shm_prefix"] = launched.shm_prefix
        report.config["launch"] = launched.config
    name_profiles(report, opts)
    if launched is not None and launched.runtime_prefixes:
        report.data["runtime_shm_prefixes"] = launched.runtime_prefixes
    return report


def _config(opts: MicroOptions, cfg: PreprocessConfig, dev: Any, profile: str) -> dict[str, Any]:
    """``config``: the options as given, what they resolved to and what the run was made of."""
    return opts.model_dump(mode="json", exclude={"fault_hooks"}) | {  # a test seam, not a setting
        "input": str(opts.images) if opts.images else describe_spec(opts.groups),
        "groups": [list(g) for g in opts.groups],
        "defaults_profile": profile,
        "preprocess": cfg.summary(),
        **variant_config(opts.arms, opts.runtime_spec, opts.transport, opts.decoder, dev),
    }


def _control_desc(cfg: PreprocessConfig, control: Samples) -> str:
    side = cfg.merge_kernel_size * cfg.patch_size
    n = next((len(r[0].get("decisions") or []) for r in control.values() if r), 0)
    return f"{n} image(s) of {side}x{side} (one merged token each)"


def _median_timeline(recs: list[Repeat]) -> MedianTimeline:
    """The per-lane timeline of the repeat whose total is the median."""
    ordered = sorted(recs, key=lambda r: r["total_ms"])
    rec = ordered[len(ordered) // 2]
    return MedianTimeline(repeat=rec["iteration"], ranks=rec.get("timeline") or [])


def _headline(names: Sequence[str]) -> str:
    """The key of the change-vs-baseline speedup (``speedups.<change>_vs_<baseline>``)."""
    return f"{with_role(names, 'change')}_vs_{with_role(names, 'baseline')}"


def _summary(
    part: mr.ArmsPart,
    floor_ms: float | None,
    error: str | None,
    opts: MicroOptions,
    samples: Samples,
) -> dict[str, Any]:
    """The summary: every figure of ``results.micro_figures.FIGURES`` the run gives, and what the
    run was (arms, launches, runtime, carrier, decisions, the preprocess cache, an error)."""
    d, arms = part.derived, part.arms
    head = d.headline
    dec = next((r["decisions"] for r in samples.get(d.change, []) if r.get("decisions")), None)
    cache_on = get_profile(opts.runtime_spec).preprocess_cache
    return {
        "verdict": part.verdict,
        **stated_figures(d),
        "arms": list(opts.arms),
        "speedup_interval": head.interval.as_dict() if head else None,
        "launches": opts.launches,
        "launches_completed": len(set(d.launches)),
        "speedup_spread_dominated_by": head.spread.dominant if head else None,
        **{f"{a.replace('-', '_')}_h2d_bytes": arms[a]["h2d_bytes"] for a in arms},
        "runtime": opts.runtime,
        # per arm, one repeat: preprocess-cache hits/misses, the feature hash's bytes
        "hash_and_cache": {a: hash_and_cache(arms[a]["copies"], cache_on) for a in arms},
        "transport": opts.transport,
        "decisions": [{"image": i, **x} for i, x in enumerate(dec)] if dec else None,
        "error": error,
    }


def exit_code(report: Report) -> int:
    s = report.summary
    if s.get("error"):
        return 1
    speed = s.get("speedup_median")  # the change against the baseline, when both ran
    measured = speed is None or not math.isnan(speed)
    return 0 if s["bit_exact_all_repeats"] is not False and measured else 1
