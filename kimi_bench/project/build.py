"""The projection's report: the model stated, what was fitted, the projected stages and
totals, and (with measured reports) the prediction error table."""

from __future__ import annotations

import datetime as dt
import platform
import sys
from dataclasses import replace
from pathlib import Path

import kimi_bench
from kimi_bench.infra.environment import git_commit
from kimi_bench.project.calibration import Calibration, ProjectionError
from kimi_bench.project.model import Host, calibration_topology
from kimi_bench.project.projection import Projection, Scale, Total, project, totals
from kimi_bench.project.validate import TARGET_PCT, ErrorRecord, total_errors, validate
from kimi_bench.project.validation_notes import validation_notes, widen
from kimi_bench.report.figures import figures_png
from kimi_bench.report.html import write_html
from kimi_bench.report.kinds import ProjectReport
from kimi_bench.report.model import Report
from kimi_bench.report.view import view_of
from kimi_bench.report.writers import write_csv, write_json, write_markdown

MODEL = [
    "model: each stage of each arm at N ranks is predicted from what the calibration report "
    "measured at its own rank count; the stage's kind decides how it scales "
    "(kimi_bench/project/model.py states each):",
    "fixed: once per request in one process (producer, d2h, pickling serialize, to_rank0, "
    "owner_materialize): same bytes, same time at any rank count.",
    "threaded: torch host copies (HWC->CHW, copy into shared memory, clone out of it): micro "
    "gives each process cores // (ranks per node + 1) torch threads, so a copy gets slower "
    "as ranks are added. With a host probe of the calibration host (same core count): each "
    "copy op of the stage changes by what the probe measured for its bytes at both rank "
    "counts, alone for the producer's copies, N processes at once for the ranks' (take_copy); "
    "the rest of the stage stays. Without one: the stage minus its fixed latency (intercept "
    "of ms on bytes across the arms) scales by T^-thread_exponent.",
    "tree: gloo broadcasts CPU tensors along a binomial tree (gloo/broadcast.cc): "
    "ceil(log2 N) rounds, in round i every rank below 2^i sends the whole message to rank + "
    "2^i; k concurrent transfers on one node take max(1, k / loopback_streams) times one "
    "transfer (one end of a transfer to another node counts half); rounds that cross nodes "
    "also wait for bytes in or out of a node / link_gbps. Rank 0's pickling and each "
    "receiver's unpickling stay at their calibration cost.",
    "link: H2D = bytes per rank at the rank's pageable copy rate (fitted) + bytes over the "
    "busiest GPU link at the pinned link rate (the calibration's floor); ranks sharing a GPU "
    "share its link, ranks on their own GPUs do not; owners from the runtime's owner "
    "assignment.",
    "allgather (the encoder-output gather, when timed): ring all-gather, (N-1)/N of the "
    "bytes; between nodes at link_gbps.",
    "total = the calibration's measured median total + the sum of the stage changes.",
]


def _environment(cals: list[Calibration]) -> dict[str, object]:
    first = cals[0].env
    return {
        "package": "kimi-bench",
        "package_version": kimi_bench.__version__,
        "python": first.python,
        "torch": first.torch,
        "cuda": first.cuda,
        "device": first.device,
        "device_name": f"projected from {first.device_name}",
        "gpu_count": first.gpu_count,
        "git": git_commit(),
        "preset": first.preset,
        "seed": first.seed,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "projected_on": {"python": sys.version.split()[0], "platform": platform.platform()},
        "calibration_environments": {c.source: c.environment for c in cals},
    }


def _fitted_rows(projs: list[Projection], host: Host) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for p in projs:
        cal, f = p.calibration, p.fitted
        fitted: list[tuple[str, object]] = [
            ("calibration report", cal.source),
            ("ranks (one host)", cal.ranks),
            ("GPUs shared by the ranks", cal.gpus),
            (
                "torch threads per process (micro's split)",
                calibration_topology(cal).threads(host.cores),
            ),
            ("pinned H2D link GB/s", cal.h2d_gbps),
            (f"one gloo transfer GB/s ({f.loopback_source})", f.loopback_gbps),
        ]
        fitted += [(f"{k} pageable H2D GB/s per rank", v) for k, v in f.pageable_gbps.items()]
        fitted += [(f"{s} fixed latency ms", v) for s, v in f.intercepts_ms.items() if v > 0]
        rows += [{"carrier": cal.transport, "what": what, "value": v} for what, v in fitted]
    return rows


def _calibration_for(cals: list[Calibration], measured: Calibration) -> Calibration:
    for c in cals:
        if c.transport == measured.transport:
            return c
    raise ProjectionError(
        f"{measured.source} used the {measured.transport} carrier but no calibration report "
        "did; give a calibration report of that carrier too"
    )


def _host_notes(host: Host, scale: Scale) -> list[str]:
    return [
        f"host constants (not measurable at one rank count; override with options): "
        f"cores per node {host.cores if host.cores is not None else 'unknown'}"
        + (
            ""
            if host.cores is not None
            else " (thread split not modelled: the report does not record cpu_count; "
            "pass --host-cores)"
        )
        + (
            f"; host-copy probe: {host.probe.source}"
            if host.probe is not None and host.probe.cores == host.cores
            else f"; thread_exponent {host.thread_exponent:g} (torch copy of 77 MB into and "
            "out of shared memory, 1 vs 5 threads, on an H200 host: exponents 0.57 and 0.73)"
        )
        + "; "
        f"loopback_streams {host.loopback_streams:g} (gloo broadcast of 77 MB on an H200 "
        "host at 2/4/8 local ranks, 18.5/40.3/83.8 ms, SPEC section 8: both 4 and 8 ranks "
        f"give 1.70); inter-node link {', '.join(f'{g:g}' for g in scale.link_gbps)} Gb/s.",
        f"projection topology: one rank per GPU, {scale.gpus_per_node} GPUs and ranks per "
        "node, rank r on node r // ranks-per-node (torchrun), the producer and rank 0 on "
        "node 0, every node like the calibration host (cores, GPU link, copy rates). The "
        "validation instead predicts the calibration's own host: all ranks on one node "
        "sharing its GPU(s), as micro ran them.",
    ]


def _speedups(scale: Scale, tots: list[Total]) -> str:
    """Each carrier's speedup at the largest asked rank count it was projected to."""
    asked = [t for t in tots if t.ranks in scale.ranks and t.speedup]
    top = {t.transport: t.ranks for t in sorted(asked, key=lambda t: t.ranks)}
    return "; ".join(
        t.transport
        + (f" @ {t.link_gbps:g} Gb/s" if t.link_gbps else "")
        + f": {t.speedup:.2f}x at {t.ranks} ranks"
        for t in asked
        if t.ranks == top[t.transport]
    )


def unprojected(projs: list[Projection], scale: Scale) -> str | None:
    """Why none of the asked rank counts was projected (None when some were)."""
    done = {r.ranks for p in projs for r in p.rows}
    if done & set(scale.ranks):
        return None
    asked = ", ".join(str(r) for r in sorted(set(scale.ranks)))
    shm = [p for p in projs if p.calibration.uses_segments]
    if shm and len(shm) == len(projs):
        return (
            f"no projection at {asked} ranks: with {scale.gpus_per_node} GPUs per node they "
            "span nodes, and shared memory (the shm calibration) does not cross nodes. Add a "
            "pickle calibration report (micro --transport pickle), e.g. kimi-bench project "
            "r2-shm/report.json r2-pickle/report.json, or project at most "
            f"{scale.gpus_per_node} ranks"
        )
    return f"no projection at {asked} ranks"


def _summary(
    projs: list[Projection], scale: Scale, tots: list[Total], tot_err: list[ErrorRecord]
) -> dict[str, object]:
    cals = [p.calibration for p in projs]
    verdict = _speedups(scale, tots)
    errs = [t.error_pct for t in tot_err if t.error_pct is not None]
    worst = max(errs, key=abs) if errs else None
    ok = sum(1 for t in tot_err if t.within_target)
    if worst is not None:
        verdict += (
            f"; validation: worst total error {abs(worst):.1f}% "
            f"({ok}/{len(tot_err)} within +-{TARGET_PCT:.0f}%)"
        )
    return {
        "verdict": (
            f"projected speedup {verdict}"
            if verdict
            else (unprojected(projs, scale) or "no projection")
        ),
        "calibrations": ", ".join(c.source for c in cals),
        "validation_cases": len(tot_err),
        "validation_within_target": ok,
        "validation_worst_total_error_pct": worst,
        "target_pct": TARGET_PCT,
    }


def build_projection(
    cals: list[Calibration], host: Host, scale: Scale, measured: list[Calibration]
) -> Report:
    """Project every calibration (one per carrier) and check against measured reports."""
    if host.cores is None:
        host = replace(host, cores=next((c.cores for c in cals if c.cores), None))
    projs = [project(c, host, scale) for c in cals]
    rows = [r for p in projs for r in p.rows]
    errors: list[ErrorRecord] = []
    for m in measured:
        cal = _calibration_for(cals, m)
        proj = next(p for p in projs if p.calibration is cal)
        errors += validate(cal, proj.fitted, host, [m])
    errors = [e for e in errors if e.predicted_ms is not None or e.measured_ms is not None]
    widen(rows, errors)
    tots = totals(rows)
    tot_err = total_errors(errors)
    notes = [*MODEL, *_host_notes(host, scale)]
    notes += [s for p in projs for s in p.skipped]
    notes += validation_notes(errors)
    config = {
        "calibration": [c.source for c in cals],
        "validate": [m.source for m in measured],
        "ranks": list(scale.ranks),
        "gpus_per_node": scale.gpus_per_node,
        "link_gbps": list(scale.link_gbps),
        "host": dict(host.__dict__),
    }
    fitted_rows = _fitted_rows(projs, host)
    return Report(
        kind="project",
        environment=_environment(cals),
        config=config,
        results=[r.as_dict() for r in rows],
        summary=_summary(projs, scale, tots, tot_err),
        notes=notes,
        data={
            "model": MODEL,
            "fitted": fitted_rows,
            "totals": [t.as_dict() for t in tots],
            "validation": {
                "stages": [e.as_dict() for e in errors],
                "totals": [t.as_dict() for t in tot_err],
            },
        },
    )


def emit_projection(report: Report, out: Path) -> list[Path]:
    """report.json, report.md, projection.csv, validation.csv (with measured reports),
    projection.png (with matplotlib) and report.html (the figure embedded), as every kind."""
    view = view_of(report)
    files = [
        write_markdown(view, out / "report.md", "kimi-bench projection"),
        write_csv(report.results, out / "projection.csv"),
    ]
    validation = report.typed(ProjectReport).validation
    val = validation.stages if validation is not None else None
    if val:
        files.append(write_csv(val, out / "validation.csv"))
    figs = figures_png(report)  # [] without matplotlib
    paths = [f.save(out) for f in figs]
    page = write_html([view], out / "report.html", title="kimi-bench project", figures=[figs])
    # report.json last: a folder holding it holds the whole projection
    return [*files, *paths, page, write_json(report, out / "report.json")]
