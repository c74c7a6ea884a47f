"""From peers' runs (one per arm) to a ``serve-ab`` report that ``gate`` and ``compare``
read like kimi-bench's own.

Per-request files (sglang ``--output-details``, vLLM ``--save-detailed``, GuideLLM's
request records): one row per request (``ttft_ms``, ``error``, token counts), each request
its own independent unit (the file records no server batches). The A/B block is derived
from those rows by the gate's own evidence code, so the report and the gate agree.

Summary-only files (AIPerf's JSON export, or a run without the detail flags): no request
row is written (none is invented); ``config.per_request`` is false, the per-arm rows
carry the tool's own counts and percentiles, and the gate's evidence then uses only those
counts (completeness, ``max_failed``, throughput). TTFT delta rules cannot be evaluated on
such a report and fail by name.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

from kimi_bench import __version__
from kimi_bench.ci.evidence_rows import evidence
from kimi_bench.infra.stats.compare import Comparison
from kimi_bench.infra.stats.format import fmt_pct
from kimi_bench.peers.base import PeerFormatError, PeerRun, Stated
from kimi_bench.peers.figures import METRICS
from kimi_bench.report.model import Report, ReportError
from kimi_bench.results.serve import ArmCell, ServeRaw, derive_serve
from kimi_bench.results.serve_rows import serve_requests

Ab = dict[str, dict[str, dict[str, Comparison | None]]]  # rate -> arm -> metric (``evidence``)


def _tool_mean(run: PeerRun, pick: Callable[[Stated], float | None]) -> float | None:
    """The tool's own figure over the file's repeats (None when a repeat lacks it)."""
    values = [pick(r.stated) if r.stated is not None else None for r in run.repeats]
    if not values or any(v is None for v in values):
        return None
    return sum(float(v) for v in values if v is not None) / len(values)


def _tool_figures(run: PeerRun) -> dict[str, float | str]:
    """``tool_<metric>_<stat>_ms`` (the tool's own, mean over repeats) and the method it
    computes them by (``tool_method``)."""
    out: dict[str, float | str] = {}
    methods = set()
    for metric in METRICS:
        for stat in ("mean", "median", "p90", "p99"):
            got = [f for rep in run.repeats for f in rep.figures
                   if (f.metric, f.stat) == (metric, stat) and f.stated is not None]  # fmt: skip
            if got and len(got) == len(run.repeats):
                out[f"tool_{metric}_{stat}_ms"] = sum(float(f.stated or 0) for f in got) / len(got)
                methods.add(got[0].method.split(";")[0])
    if methods:
        out["tool_method"] = "; ".join(sorted(m for m in methods if m))
    good = [f.stated for rep in run.repeats for f in rep.figures
            if f.metric == "goodput_req_per_s" and f.stated is not None]  # fmt: skip
    if good and len(good) == len(run.repeats):
        out["tool_goodput_req_per_s"] = sum(good) / len(good)
    return out


def _failed(run: PeerRun, cell: ArmCell) -> int | None:
    """Failed requests: the rows', else the tool's count (None where a repeat has none)."""
    if run.per_request:
        return len(cell.rows) - cell.completed
    failed = [r.failed for r in run.repeats]
    return None if None in failed else sum(f or 0 for f in failed)


def _arm_row(label: str, arm: str, run: PeerRun, cell: ArmCell) -> dict[str, float | str | None]:
    reps = run.repeats
    spans = [r.duration_s for r in reps if r.duration_s]
    thr = [r.completed / r.duration_s for r in reps if r.duration_s]
    tool = _tool_figures(run)
    out: dict[str, float | str | None] = {"rate": label, "arm": arm, "tool": run.tool}
    if run.per_request:
        out |= cell.latency_figures((50, 90, 99))
        out |= {f"ttft_{s}_ms": cell.stat("ttft", s) for s in ("median", "p90", "p99")}
    else:  # the tool's own numbers: there are no rows to derive them from
        out |= {k.removeprefix("tool_"): v for k, v in tool.items() if k.endswith("_ms")}
        for s in ("median", "p90", "p99"):
            out.setdefault(f"ttft_{s}_ms", None)
    out["failed"] = _failed(run, cell)
    out |= tool
    out |= {
        "tool_ttft_median_ms": _tool_mean(run, lambda s: s.median_ttft_ms),
        "tool_ttft_mean_ms": _tool_mean(run, lambda s: s.mean_ttft_ms),
        "req_per_s": sum(thr) / len(thr) if thr else None,
        "tool_req_per_s": _tool_mean(run, lambda s: s.req_per_s),
        "completed": sum(r.completed for r in reps),
        "duration_s": sum(spans) if spans else None,
    }
    return out


def _request_rows(label: str, arm: str, run: PeerRun) -> list[dict[str, object]]:
    head = {"rate": label, "arm": arm}
    return [
        {**head, "repeat": k, "status": None, "batch_id": None, **row.columns()}
        for k, rep in enumerate(run.repeats)
        for row in rep.rows or []
    ]


def _planned(run: PeerRun) -> int:
    """Requests the tool sent per repeat: the rows, else completed + failed."""
    reps = run.repeats
    return max(len(r.rows) if r.rows is not None else r.completed + (r.failed or 0) for r in reps)


def source_of(run: PeerRun, version: str | None) -> dict[str, object]:
    """The file an arm was read from (``config.source.arms``), as JSON."""
    return {
        "tool": run.tool,
        "version": version or run.version,
        "format": run.fmt,
        "file": run.path.name,
        "per_request": run.per_request,
        "repeats": len(run.repeats),
        "load": run.load.as_dict(),
        "stated": [r.stated.as_dict() if r.stated else {} for r in run.repeats],
        "figures": [[f.as_dict() for f in r.figures] for r in run.repeats],
        "sha256": run.digest or None,
        **{k: v for k, v in run.details.items() if v is not None},
    }


def _notes(runs: dict[str, PeerRun], per_request: bool, version: str | None) -> list[str]:
    tools = sorted({r.tool for r in runs.values()})
    held = any(rep.stated and rep.stated.itl_held for r in runs.values() for rep in r.repeats)
    itl = "; mean, median and p99 ITL over every gap pooled" if held else ""
    figs = [f for r in runs.values() for rep in r.repeats for f in rep.figures]
    checked = sorted({f.metric.upper() for f in figs if f.metric in METRICS and f.rows is not None})
    what = f"each {'/'.join(checked)} statistic" if checked else "no latency statistic (no rows)"
    notes = [
        f"Imported from {', '.join(tools)} result files by `kimi-bench import` "
        f"({', '.join(f'{a}: {r.path.name}' for a, r in runs.items())}): the tool measured, "
        "kimi-bench only re-reads its numbers. TTFT is the tool's own client-side time "
        "to the first token. req_per_s is RECOMPUTED by kimi-bench as completed requests / "
        "the tool's benchmark duration; tool_req_per_s is the tool's own figure, shown beside "
        "it (they differ where the tool counts its span or its rate differently). The rows "
        "were checked against every figure the tool states that rows can give (counts, "
        f"throughput, {what}, by the tool's own method{itl}). No "
        "stage times or copy ledger (the server's internals are not in the file).",
        f"Load: {next(iter(runs.values())).load.text()}.",
    ]
    notes += [_figures_note(arm, run) for arm, run in runs.items()]
    if per_request:
        notes.append(
            "Per-request rows are the tool's per-request lists; each request is one "
            "independent unit (the file records no server batches). A/B intervals and "
            "tests resample requests."
        )
    else:
        bare = [a for a, r in runs.items() if not r.per_request]
        notes.append(
            f"SUMMARY ONLY: {', '.join(bare)} carries no per-request data (AIPerf's JSON "
            "export, or a run without sglang's --output-details / vLLM's --save-detailed), "
            "so no request row is in this report and none was invented. The per-arm rows hold "
            "the tool's own counts and percentiles; the gate can check completeness, failed "
            "requests and throughput, not TTFT deltas or intervals."
        )
    unknown = [a for a, r in runs.items() if any(x.failed is None for x in r.repeats)]
    if unknown:
        notes.append(
            f"{', '.join(unknown)}: the file does not count failed requests (sglang's summary "
            "without --output-details), so the run cannot be shown complete and the gate's "
            "complete rule fails; rerun with --output-details."
        )
    if version is None and any(r.version is None for r in runs.values()):
        notes.append(
            "The tool's version is not recorded in its result file: give --tool-version to "
            "record it."
        )
    return notes


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.6g}"


def _figures_note(arm: str, run: PeerRun) -> str:
    """The tool's latency figures of the first repeat, each beside what its rows give by
    the tool's method and the method named (where kimi-bench's own numpy figure in the
    per-arm row may differ: another percentile method or definition)."""
    rep = run.repeats[0]
    parts = []
    for f in rep.figures:
        if f.metric not in METRICS or f.stat not in ("mean", "median", "p90", "p99"):
            continue
        rows = "no rows" if f.rows is None else (
            f">= {_fmt(f.rows)}" if f.bound == "at_least" else _fmt(f.rows))  # fmt: skip
        parts.append(f"{f.key} {_fmt(f.stated)} (rows: {rows})")
    methods = sorted({f.method for f in rep.figures if f.metric in METRICS and f.method})
    if not parts:
        return f"{arm}: {run.path.name} states no latency figure."
    return (f"{arm}: the tool's figures, ms (rows recomputed by its method): {'; '.join(parts)}. "
            f"Method: {' | '.join(methods)}. The per-arm row's ttft/itl/tpot/e2e figures are "
            "kimi-bench's (numpy over the rows, TPOT = (E2E - TTFT) / (output tokens - 1)); "
            "tool_* are the tool's own.")  # fmt: skip


def _one_load(runs: dict[str, PeerRun]) -> PeerRun:
    """The arms must be distinct files at one load, compared by what the loads mean
    (burstiness only at a paced rate); a load a file does not record cannot be shown
    to be the other's."""
    by_digest: dict[str, str] = {}
    for arm, run in runs.items():
        if run.digest and run.digest in by_digest:
            raise PeerFormatError(
                f"{run.path.name} ({arm}) is the same file as the {by_digest[run.digest]} arm: "
                "one run cannot be both arms (its delta would be +0.0% by construction)"
            )
        by_digest[run.digest] = arm
    if len(runs) > 1:
        for arm, run in runs.items():
            if not run.load.recorded or (run.load.paced and "burstiness" in run.load.unrecorded):
                raise PeerFormatError(
                    f"{arm}: {run.path.name} does not record its load ({run.load.text()}): "
                    "the arms cannot be shown to have run the same load (import it alone, "
                    "or with the file that records it: AIPerf's profile_export_aiperf.json "
                    "beside its records)"
                )
    meanings = {r.load.meaning() for r in runs.values()}
    if len(meanings) != 1:
        shown = "; ".join(f"{a}: {r.load.text()}" for a, r in runs.items())
        raise PeerFormatError(
            f"the files ran at different loads ({shown}): import each load separately"
        )
    return next(iter(runs.values()))


def build_import_report(runs: dict[str, PeerRun], version: str | None = None) -> Report:
    """One ``serve-ab`` report, one arm per imported file (``runs``: arm -> run). The report
    goes through the same checks as a measured one (``ci.evidence``: the report model's
    checks, among them the rows against each tool's own summary figures); a disagreement
    is PeerFormatError naming both figures."""
    load = _one_load(runs).load
    label = load.label
    per_request = all(r.per_request for r in runs.values())
    bare = [a for a, r in runs.items() if not r.per_request]
    if bare and len(bare) < len(runs):
        raise PeerFormatError(
            f"{', '.join(bare)}: summary only, while the other files have per-request rows: "
            "one report holds one kind (import them separately)"
        )
    reqs = [row for arm, run in runs.items() for row in _request_rows(label, arm, run)]
    derived = derive_serve(ServeRaw(tuple(serve_requests(reqs))))  # the rows' figures, typed
    cells = {arm: derived.cell(label, arm) for arm in runs}
    results = [_arm_row(label, arm, run, cells[arm]) for arm, run in runs.items()]
    arms = list(runs)
    sources = {arm: source_of(run, version) for arm, run in runs.items()}
    tools = sorted({r.tool for r in runs.values()})
    config = {
        "rates": [load.as_dict()["request_rate"]],
        "rate_labels": [label], "load": load.as_dict(), "arms": arms,
        "requests": max(_planned(r) for r in runs.values()),
        "repeats": max(len(r.repeats) for r in runs.values()), "seed": 0,
        "ranks": None, "transport": None, "runtime": None, "preset": None,
        "resolution": None, "per_request": per_request, "imported": True,
        "source": {"tools": tools, "arms": sources},
    }  # fmt: skip
    env = {
        "device": None,
        "device_name": None,
        "source": {"tools": tools, "versions": {a: version or r.version for a, r in runs.items()}},
        "kimi_bench_version": __version__,
        "imported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    failed = [_failed(run, cells[arm]) for arm, run in runs.items()]
    summary = {
        "verdict": "",
        "failed_requests": None if None in failed else sum(f or 0 for f in failed),
        "error": None,
        "rates": [label],
        "arms": arms,
        "tools": tools,
    }
    data: dict[str, object] = {"ab": {}, "requests": reqs, "copies": [], "final": True}
    rep = Report(
        "serve-ab", env, config, results, summary, _notes(runs, per_request, version), data
    )
    try:
        serve = evidence(rep).serve
        ab: Ab = serve.ab if serve is not None else {}
    except ReportError as exc:
        raise PeerFormatError(str(exc).removeprefix("serve-ab report: ")) from None
    data["ab"] = {
        lab: {arm: {k: (c.as_dict() if c is not None else None) for k, c in v.items()}
              for arm, v in per_arm.items()}
        for lab, per_arm in ab.items()
    }  # fmt: skip
    summary["verdict"] = _verdict(ab, tools, arms[0], results[0])
    return rep


def _verdict(ab: Ab, tools: list[str], base: str, first: dict[str, float | str | None]) -> str:
    head = f"imported from {', '.join(tools)}"
    parts = []
    for label, per_arm in ab.items():
        for arm, v in per_arm.items():
            med = v["median_ttft"]
            if med is None:
                parts.append(f"{label}: {arm} median TTFT not comparable (summary only)")
                continue
            sig = "" if med.significant else f" ({med.verdict})"
            parts.append(f"{label}: {arm} median TTFT {fmt_pct(med.delta_pct)}{sig}")
    if not parts:
        ttft = first["ttft_median_ms"]
        text = f"{ttft:.1f} ms" if isinstance(ttft, (int, float)) else "n/a"
        return f"{head}: one arm ({base}), median TTFT {text}, {first['completed']} completed"
    return f"{head}: vs {base}: " + "; ".join(parts)


def default_arm(path: Path) -> str:
    return path.stem
