"""``micro``: where do the milliseconds and bytes go, stage by stage, for eager vs
deferred, with a real producer process and real gloo ranks?"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kimi_bench.bench.images import describe_spec
from kimi_bench.bench.micro_worker import MicroJob, producer_main, rank_main
from kimi_bench.bench.procs import Harness
from kimi_bench.bench.stats import summarize
from kimi_bench.config import PreprocessConfig
from kimi_bench.environment import environment, resolve_device
from kimi_bench.ledger import Ledger, sort_copies
from kimi_bench.pipeline import ARMS, STAGES
from kimi_bench.report import Report, View
from kimi_bench.runtime import DEFAULT_RUNTIME, get_profile

# Per stage: which measured byte count it moves.
_NOISY = 0.5  # (p90 - p10) / median above this earns a noise warning


@dataclass
class MicroOptions:
    cfg: PreprocessConfig
    groups: tuple[tuple[int, int, int], ...] = ((4, 1536, 1024),)
    ranks: int = 8
    transport: str = "shm"
    device: str = "auto"
    repeats: int = 20
    warmup: int = 3
    seed: int = 0
    content: str = "random"
    timeout_s: float = 300.0
    runtime: str = DEFAULT_RUNTIME
    fault: str | None = None
    notes: tuple[str, ...] = ()  # free-form explanations carried into the report

    def validate(self) -> None:
        if self.ranks < 1:
            raise ValueError(f"--ranks must be >= 1, got {self.ranks}")
        if self.repeats < 1 or self.warmup < 0:
            raise ValueError("--repeats must be >= 1 and --warmup >= 0")
        if self.transport not in ("shm", "pickle"):
            raise ValueError(f"--transport must be shm or pickle, got {self.transport!r}")
        get_profile(self.runtime)


class MicroFailed(RuntimeError):
    """The run stopped early; ``report`` holds what was measured until then."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def _stage_record(rec: dict[str, Any]) -> dict[str, Any]:
    """One repeat's marks -> stage durations (ms) on the critical path, the merged copy
    ledger (producer + every rank) and the bit-exactness flags."""
    ranks = rec["ranks"]
    prod = ranks[0]["producer"]
    pm = prod["marks"]
    bounds = [
        pm["start"],
        pm["producer"],
        pm["d2h"],
        pm["serialize"],
        ranks[0]["to_rank0"],
        *(max(r[s] for r in ranks) for s in STAGES[4:]),
    ]
    ledger = Ledger().merge(prod["ledger"])
    for r in ranks:
        ledger.merge(r["ledger"])
    by_stage = ledger.by_stage()
    return {
        "stage_ms": {s: (bounds[i + 1] - bounds[i]) * 1e3 for i, s in enumerate(STAGES)},
        "stage_bytes": {s: by_stage.get(s, 0) for s in STAGES},
        "total_ms": (bounds[-1] - bounds[0]) * 1e3,
        "copies": ledger.rows(),
        "decisions": prod.get("decisions"),
        "bit_exact": (all(r["bit_exact"] for r in ranks) if rec["arm"] != "eager" else None),
        "bit_exact_fp32": (
            all(r["bit_exact_fp32"] for r in ranks) if rec["arm"] != "eager" else None
        ),
    }


def run_micro(opts: MicroOptions, progress: Callable[[int, int], None] | None = None) -> Report:
    """Run both arms ``warmup + repeats`` times, interleaved per repeat."""
    opts.validate()
    dev = resolve_device(opts.device)
    samples: dict[str, list[dict[str, Any]]] = {a: [] for a in ARMS}
    floor: dict[str, Any] = {}
    total = (opts.warmup + opts.repeats) * len(ARMS)
    done = 0
    harness = Harness()
    job = MicroJob(
        cfg=opts.cfg,
        groups=opts.groups,
        content=opts.content,
        seed=opts.seed,
        ranks=opts.ranks,
        transport=opts.transport,
        device=dev.type,
        repeats=opts.repeats,
        warmup=opts.warmup,
        prefix=harness.prefix,
        init_file=harness.init_file,
        runtime=opts.runtime,
        fault=opts.fault,
    )
    error: str | None = None
    leftovers: list[str] = []
    try:
        prod_end, rank0_end = harness.pipe()
        harness.start("producer", producer_main, job, prod_end)
        for r in range(opts.ranks):
            harness.start(f"rank{r}", rank_main, job, r, rank0_end if r == 0 else None)
        for kind, payload in harness.messages(opts.timeout_s):
            if kind == "floor":
                floor = payload
                continue
            done += 1
            if progress:
                progress(done, total)
            if payload["iteration"] < opts.warmup:
                continue
            rec = _stage_record(payload)
            rec["iteration"] = payload["iteration"] - opts.warmup
            samples[payload["arm"]].append(rec)
            if rec["bit_exact"] is False:
                raise RuntimeError(
                    f"repeat {rec['iteration']}: the owner's BF16 output differs between "
                    "eager and deferred (torch.equal is False); no speedup is reported"
                )
    except KeyboardInterrupt:
        error = "interrupted by the user (Ctrl-C)"
    except Exception as exc:  # a failed rank, a mismatch, a timeout: keep what we have
        error = str(exc).splitlines()[0]
    finally:
        leftovers = harness.stop()
    report = build_report(opts, dev, samples, floor, error, leftovers)
    report.data["shm_prefix"] = harness.prefix
    if error:
        raise MicroFailed(error, report)
    return report


def _arm_summary(recs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Per stage: raw samples, summary and bytes; the arm's copy ledger and totals."""
    stages: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for s in STAGES:
        vals = [r["stage_ms"][s] for r in recs]
        summ = summarize(vals) if vals else None
        b = recs[0]["stage_bytes"][s] if recs else None
        stages[s] = {
            "bytes": b,
            "samples_ms": vals,
            **({"summary_ms": summ.as_dict()} if summ else {}),
        }
        rows.append(
            {
                "stage": s,
                "median_ms": summ.median if summ else None,
                "p10_ms": summ.p10 if summ else None,
                "p90_ms": summ.p90 if summ else None,
                "bytes": b,
            }
        )
    tot = summarize([r["total_ms"] for r in recs])
    ledger = Ledger().merge(sort_copies(recs[0]["copies"], STAGES)) if recs else Ledger()
    changed = [r["iteration"] for r in recs[1:] if r["copies"] != recs[0]["copies"]]
    totals = ledger.totals()
    summary = {
        "stages": stages,
        "total_ms": tot.as_dict() | {"samples": [r["total_ms"] for r in recs]},
        "copies": ledger.rows(),
        "copy_totals": totals,
        "ledger_changed_in_repeats": changed,
        "h2d_bytes": totals["h2d_bytes"] if recs else None,
        "moved_bytes": totals["copied_bytes"] if recs else None,
    }
    rows.append(
        {
            "stage": "TOTAL",
            "median_ms": tot.median,
            "p10_ms": tot.p10,
            "p90_ms": tot.p90,
            "bytes": summary["moved_bytes"],
        }
    )
    return summary, rows


def _speedup(samples: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    pairs = zip(samples["eager"], samples["deferred"], strict=False)
    ratios = [e["total_ms"] / d["total_ms"] for e, d in pairs if d["total_ms"] > 0]
    return summarize(ratios).as_dict() | {"samples": ratios}


def build_report(
    opts: MicroOptions,
    dev: Any,
    samples: dict[str, list[dict[str, Any]]],
    floor: dict[str, Any],
    error: str | None,
    leftovers: list[str],
) -> Report:
    import torch

    rows: list[dict[str, Any]] = []
    arms: dict[str, Any] = {}
    for arm in ARMS:
        arms[arm], arm_rows = _arm_summary(samples[arm])
        rows += [{"arm": arm, **r} for r in arm_rows]
    speed = _speedup(samples)
    d_med = arms["deferred"]["total_ms"]["median"]
    floor_ms = floor.get("floor_ms")
    ratio = d_med / floor_ms if floor_ms and d_med == d_med else None
    exact = [r["bit_exact"] for r in samples["deferred"]]
    e_bytes, d_bytes = arms["eager"]["moved_bytes"], arms["deferred"]["moved_bytes"]
    notes = [
        f"input: {describe_spec(opts.groups)} ({opts.content} content), preset {opts.cfg.name}.",
        "stages follow the critical path: each stage ends when the slowest rank finished it; "
        "stage times add up to the total.",
        "speedup = median over repeats of eager_total / deferred_total (paired per repeat).",
    ]
    notes.append(
        f"runtime profile {opts.runtime}: {get_profile(opts.runtime).description}; the copy "
        "ledger (copies) lists every operation that moved pixel bytes, per arm and stage, "
        "and the runtime function it mirrors."
    )
    if dev.type == "cpu":
        notes.append(
            "no CUDA: the device is emulated in host memory; each H2D/D2H of the runtime is "
            "a host copy of the same bytes here (ledger entries say so), and the floor is the "
            "CPU materialize time alone."
        )
    elif torch.cuda.device_count() < opts.ranks:
        notes.append(
            f"{opts.ranks} ranks share {torch.cuda.device_count()} GPU(s) round robin; "
            "their device copies contend for the same PCIe link."
        )
    for arm in ARMS:
        for s, st in arms[arm]["stages"].items():
            sm = st.get("summary_ms")
            if sm and sm["median"] > 1.0 and (sm["p90"] - sm["p10"]) / sm["median"] > _NOISY:
                notes.append(
                    f"noisy: {arm}/{s} p10-p90 spread is over {_NOISY:.0%} of its "
                    "median; use more --repeats or a quieter machine."
                )
    notes += where_time_goes(arms, floor_ms) + list(opts.notes)
    if error:
        notes.append(f"run stopped early: {error}; results are partial.")
    if leftovers:
        notes.append(f"removed {len(leftovers)} leftover shared-memory segment(s) after the run")
    if error:
        verdict = f"INCOMPLETE after {len(exact)} repeats: {error}"
    elif exact and all(exact):
        verdict = (
            f"deferred {speed['median']:.2f}x faster (p10 {speed['p10']:.2f}, p90 "
            f"{speed['p90']:.2f}); owner BF16 outputs identical in {len(exact)} repeats"
        )
    else:
        verdict = "MISMATCH: outputs differ"
    summary = {
        "verdict": verdict,
        "repeats_completed": len(samples["deferred"]),
        "eager_median_ms": arms["eager"]["total_ms"]["median"],
        "deferred_median_ms": d_med,
        "speedup_median": speed["median"],
        "speedup_p10": speed["p10"],
        "speedup_p90": speed["p90"],
        "bit_exact_all_repeats": bool(exact) and all(exact),
        "eager_moved_bytes": e_bytes,
        "deferred_moved_bytes": d_bytes,
        "bytes_ratio": (e_bytes / d_bytes) if e_bytes and d_bytes else None,
        "eager_h2d_bytes": arms["eager"]["h2d_bytes"],
        "deferred_h2d_bytes": arms["deferred"]["h2d_bytes"],
        "floor_ms": floor_ms,
        "deferred_over_floor": ratio,
        "runtime": opts.runtime,
        "decisions": _decisions(samples),
        "error": error,
    }
    config = {
        "images": describe_spec(opts.groups),
        "groups": [list(g) for g in opts.groups],
        "content": opts.content,
        "ranks": opts.ranks,
        "transport": opts.transport,
        "runtime": get_profile(opts.runtime).summary(),
        "device": opts.device,
        "repeats": opts.repeats,
        "warmup": opts.warmup,
        "preprocess": opts.cfg.summary(),
    }
    env = environment(
        dev,
        opts.cfg.name,
        opts.seed,
        clock="time.perf_counter (CLOCK_MONOTONIC) "
        "after torch.cuda.synchronize; floor with CUDA events",
    )
    return Report(
        kind="micro",
        environment=env,
        config=config,
        results=rows,
        summary=summary,
        notes=notes,
        data={
            "arms": arms,
            "speedup": speed,
            "floor": floor,
            "floor_ms": floor_ms,
            "repeats": samples,
        },
        views=[
            View("Stages (ms, bytes)", rows),
            View("Copies (ledger per arm and stage)", _copy_rows(arms)),
            View("Deferral decision per image (deferred arm)", summary["decisions"] or []),
        ],
    )


def _copy_rows(arms: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"arm": arm, **row} for arm in ARMS for row in arms[arm]["copies"]]


def _decisions(samples: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]] | None:
    """Every image's decision and reason in the deferred arm (from the first repeat)."""
    recs = samples.get("deferred") or []
    dec = next((r["decisions"] for r in recs if r.get("decisions")), None)
    if dec is None:
        return None
    return [{"image": i, **d} for i, d in enumerate(dec)]


def _top_stages(arm: dict[str, Any], n: int = 3) -> list[tuple[str, float]]:
    meds = [
        (s, st["summary_ms"]["median"]) for s, st in arm["stages"].items() if st.get("summary_ms")
    ]
    return sorted(meds, key=lambda x: -x[1])[:n]


def where_time_goes(arms: dict[str, Any], floor_ms: float | None) -> list[str]:
    """Data-driven explanation: the stages that dominate each arm, and what separates the
    deferred arm from the floor."""
    out = []
    for arm in ARMS:
        total = arms[arm]["total_ms"]["median"]
        if not total or math.isnan(total):
            continue
        top = ", ".join(f"{s} {ms:.1f} ms ({ms / total:.0%})" for s, ms in _top_stages(arms[arm]))
        out.append(f"where {arm} time goes (median {total:.1f} ms): {top}.")
    d = arms["deferred"]
    total = d["total_ms"]["median"]
    if floor_ms and total and not math.isnan(total):
        host = [
            s
            for s in ("producer", "serialize", "to_rank0", "broadcast", "take_copy")
            if d["stages"][s].get("summary_ms")
        ]
        host_ms = sum(d["stages"][s]["summary_ms"]["median"] for s in host)
        out.append(
            f"deferred vs floor: {total:.1f} ms vs {floor_ms:.2f} ms; {host_ms:.1f} ms "
            f"({host_ms / total:.0%}) is host-side work on the raw bytes ({', '.join(host)}): "
            "staging, carrier copies and pickling that scale with raw bytes x ranks and that "
            "the floor (one pinned H2D + the kernel) does not include."
        )
    return out


def exit_code(report: Report) -> int:
    s = report.summary
    if s.get("error"):
        return 1
    return (
        0 if s["bit_exact_all_repeats"] and not math.isnan(s["speedup_median"] or math.nan) else 1
    )
