"""``micro``: where do the milliseconds and bytes go, stage by stage, for eager vs
deferred, with a real producer process and real gloo ranks?"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kimi_bench.bench.images import describe_spec
from kimi_bench.bench.micro_worker import ARMS, STAGES, MicroJob, producer_main, rank_main
from kimi_bench.bench.procs import Harness
from kimi_bench.bench.stats import summarize
from kimi_bench.config import PreprocessConfig
from kimi_bench.environment import environment, resolve_device
from kimi_bench.report import Report, View

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
    fault: str | None = None
    notes: tuple[str, ...] = ()  # free-form explanations carried into the report

    def validate(self) -> None:
        if self.ranks < 1:
            raise ValueError(f"--ranks must be >= 1, got {self.ranks}")
        if self.repeats < 1 or self.warmup < 0:
            raise ValueError("--repeats must be >= 1 and --warmup >= 0")
        if self.transport not in ("shm", "pickle"):
            raise ValueError(f"--transport must be shm or pickle, got {self.transport!r}")


class MicroFailed(RuntimeError):
    """The run stopped early; ``report`` holds what was measured until then."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def _stage_record(rec: dict[str, Any], device: str, arm: str, transport: str) -> dict[str, Any]:
    """Turn one repeat's timestamps into stage durations (ms) and bytes."""
    ranks = rec["ranks"]
    prod = ranks[0]["producer"]
    bounds = [
        prod["t0"],
        prod["t1"],
        prod["t2"],
        prod["t3"],
        ranks[0]["received"],
        max(r["broadcast"] for r in ranks),
        max(r["take_copy"] for r in ranks),
        max(r["pre_embed_move"] for r in ranks),
        max(r["owner_h2d"] for r in ranks),
        max(r["owner_materialize"] for r in ranks),
    ]
    ms = {s: (bounds[i + 1] - bounds[i]) * 1e3 for i, s in enumerate(STAGES)}
    n = len(ranks)
    cuda = device == "cuda"
    nbytes = {
        "producer": prod["feature_bytes"],
        "d2h": prod["feature_bytes"] if arm == "eager" and cuda else 0,
        "serialize": prod["shm_bytes"] + prod["blob_bytes"],
        "to_rank0": prod["blob_bytes"],
        "broadcast": ranks[0]["bcast_bytes"] * (n - 1),
        "take_copy": sum(r.get("copy_bytes", 0) for r in ranks),
        "pre_embed_move": sum(r["pre_embed_bytes"] for r in ranks),
        "owner_h2d": sum(r["owner_h2d_bytes"] for r in ranks),
        "owner_materialize": 0,
    }
    applicable = {
        "producer": True,
        "d2h": arm == "eager" and cuda,
        "serialize": True,
        "to_rank0": True,
        "broadcast": n > 1,
        "take_copy": transport == "shm",
        "pre_embed_move": arm == "eager" and cuda,
        "owner_h2d": arm == "deferred" and cuda,
        "owner_materialize": True,
    }
    return {
        "stage_ms": {s: (ms[s] if applicable[s] else None) for s in STAGES},
        "stage_bytes": nbytes,
        "total_ms": (bounds[-1] - bounds[0]) * 1e3,
        # time between the boundaries of not-applicable stages (bookkeeping, no copies)
        "unattributed_ms": sum(ms[s] for s in STAGES if not applicable[s]),
        "h2d_bytes": nbytes["pre_embed_move"] + nbytes["owner_h2d"] + prod["producer_h2d_bytes"],
        "moved_bytes": sum(v for k, v in nbytes.items() if k != "producer"),
        "bit_exact": (all(r["bit_exact"] for r in ranks) if arm == "deferred" else None),
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
            rec = _stage_record(payload, dev.type, payload["arm"], opts.transport)
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
    if error:
        raise MicroFailed(error, report)
    return report


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
        recs = samples[arm]
        stages: dict[str, Any] = {}
        for s in STAGES:
            vals = [r["stage_ms"][s] for r in recs if r["stage_ms"][s] is not None]
            applicable = bool(recs) and all(r["stage_ms"][s] is not None for r in recs)
            summ = summarize(vals) if applicable else None
            b = recs[0]["stage_bytes"][s] if recs else None
            stages[s] = {
                "applicable": applicable,
                "bytes": b,
                "samples_ms": vals if applicable else [],
                **({"summary_ms": summ.as_dict()} if summ else {}),
            }
            rows.append(
                {
                    "arm": arm,
                    "stage": s,
                    "median_ms": summ.median if summ else None,
                    "p10_ms": summ.p10 if summ else None,
                    "p90_ms": summ.p90 if summ else None,
                    "bytes": b,
                    "note": None if applicable else "n/a",
                }
            )
        tot = summarize([r["total_ms"] for r in recs])
        arms[arm] = {
            "stages": stages,
            "total_ms": tot.as_dict() | {"samples": [r["total_ms"] for r in recs]},
            "unattributed_ms": [r["unattributed_ms"] for r in recs],
            "h2d_bytes": recs[0]["h2d_bytes"] if recs else None,
            "moved_bytes": recs[0]["moved_bytes"] if recs else None,
        }
        rows.append(
            {
                "arm": arm,
                "stage": "TOTAL",
                "median_ms": tot.median,
                "p10_ms": tot.p10,
                "p90_ms": tot.p90,
                "bytes": arms[arm]["moved_bytes"],
                "note": None,
            }
        )
    speed = _speedup(samples)
    d_med = arms["deferred"]["total_ms"]["median"]
    floor_ms = floor.get("floor_ms")
    ratio = d_med / floor_ms if floor_ms and d_med == d_med else None
    exact = [r["bit_exact"] for r in samples["deferred"]]
    e_bytes, d_bytes = arms["eager"]["moved_bytes"], arms["deferred"]["moved_bytes"]
    notes = [
        f"input: {describe_spec(opts.groups)} ({opts.content} content), preset {opts.cfg.name}.",
        "stages follow the critical path: each stage ends when the slowest rank finished it; "
        "stage times plus the unattributed time of n/a stages add up to the total.",
        "speedup = median over repeats of eager_total / deferred_total (paired per repeat).",
    ]
    if dev.type == "cpu":
        notes.append(
            "CPU only: d2h, pre_embed_move and owner_h2d are not applicable (no device "
            "copies); the floor is the CPU materialize time alone."
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
        "error": error,
    }
    config = {
        "images": describe_spec(opts.groups),
        "groups": [list(g) for g in opts.groups],
        "content": opts.content,
        "ranks": opts.ranks,
        "transport": opts.transport,
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
        views=[View("Stages (ms, bytes)", rows)],
    )


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
