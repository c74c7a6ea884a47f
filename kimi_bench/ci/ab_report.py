"""The revision A/B's report: ``report.json`` (the document ``ab.run_ab`` returns) and
``report.md`` (the same facts for a reader: both commits, the machine and its load, every
launch's figures, each metric's paired change and the verdict)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from kimi_bench.ci.ab_stats import PairedChange
from kimi_bench.report.writers import md_text


@dataclass(frozen=True)
class Launch:
    """One process launch of one revision's micro and its figures (medians of its repeats)."""

    position: int  # in run order, from 0
    pair: int
    side: str
    folder: str
    wall_s: float
    deferred_ms: float
    eager_ms: float
    speedup: float
    repeats: int
    bit_exact: bool
    load_1m: float | None  # at the launch's start, from its report
    commit: str | None
    version: str | None


class LoadSnapshot(BaseModel):
    """The host's load averages (NaN where the OS has none) and its usable CPUs."""

    load_1m: float
    load_5m: float
    load_15m: float
    cpus: int | None
    at: str


class HostLoad(BaseModel):
    start: LoadSnapshot
    end: LoadSnapshot


class RevisionDoc(BaseModel):
    """One revision: as given, where it was built from, and its commit (the commits its
    launches' reports name when it was not known up front)."""

    label: str
    given: str
    source: str
    command: list[str]
    commit: str | list[str]
    version: str


class Machine(BaseModel):
    host: str
    platform: str
    device: str | None
    device_name: str | None
    cpu_count: int | None
    torch: str | None
    python: str | None


class AbSettings(BaseModel):
    launches_per_revision: int
    launches_asked: int
    max_launches: int
    order: str
    micro: list[str]
    max_regression: float
    confidence: float
    method: str
    figure: str
    figure_means: str


class AbDoc(BaseModel):
    """The revision A/B's ``report.json``."""

    kind: str = "revision-ab"
    schema_version: int
    created: str
    wall_s: float
    base: RevisionDoc
    candidate: RevisionDoc
    machine: Machine
    host_load: HostLoad
    settings: AbSettings
    launches: list[Launch]
    metrics: list[PairedChange]
    verdict: str
    exit_code: int
    failed_metrics: list[str]


def _load(v: float | None) -> str:
    return "n/a" if v is None or math.isnan(v) else f"{v:.2f}"


def _revision(rev: RevisionDoc) -> str:
    commit = ", ".join(rev.commit) if isinstance(rev.commit, list) else rev.commit
    return f"`{md_text(rev.given)}` ({rev.source}): commit `{commit}`, {md_text(rev.version)}"


def markdown(doc: AbDoc) -> str:
    """report.md's text."""
    m, s, load = doc.machine, doc.settings, doc.host_load
    lines = [
        f"# kimi-bench ab: {doc.verdict}",
        "",
        f"- base: {_revision(doc.base)}",
        f"- candidate: {_revision(doc.candidate)}",
        f"- machine: {md_text(m.host)}, {m.device} ({md_text(m.device_name)}), "
        f"{m.cpu_count} CPUs, torch {m.torch}, Python {m.python}",
        f"- host load (1 min): {_load(load.start.load_1m)} at the start, "
        f"{_load(load.end.load_1m)} at the end, on {load.end.cpus} usable CPUs",
        f"- {s.launches_per_revision} launches per revision{_extended(s)}, order "
        f"{s.order}; "
        f"micro: `{' '.join(s.micro)}`; {doc.wall_s:.0f} s in all",
        f"- gate: a metric fails when the candidate is worse by more than "
        f"{s.max_regression:.0%} and the {s.confidence:.0%} interval excludes no "
        f"change; interval: {s.method}; a launch's figure: {s.figure_means}",
        "",
        "## Metrics",
        "",
    ]
    lines += [f"- {md_text(x.sentence)}" for x in doc.metrics]
    lines += [
        "",
        "## Launches",
        "",
        f"| # | pair | revision | deferred ms ({s.figure}) | eager ms ({s.figure}) "
        "| speedup | repeats | bit-exact | load 1m | wall s | commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for la in doc.launches:
        lines.append(
            f"| {la.position + 1} | {la.pair + 1} | {la.side} | {la.deferred_ms:.3f} "
            f"| {la.eager_ms:.3f} | {la.speedup:.3f} | {la.repeats} "
            f"| {'yes' if la.bit_exact else 'NO'} | {_load(la.load_1m)} "
            f"| {la.wall_s:.1f} | `{(la.commit or 'unknown')[:12]}` |"
        )
    return "\n".join(lines) + "\n"


def write(doc: AbDoc, out: Path) -> list[Path]:
    """report.md, then report.json (last: a folder with it holds the whole report)."""
    md, js = out / "report.md", out / "report.json"
    md.write_text(markdown(doc), encoding="utf-8")
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc.model_dump(), indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(js)
    return [js, md]


def _extended(s: AbSettings) -> str:
    """`` (asked 6; pairs added while a metric was inconclusive, up to 12)`` or ""."""
    asked, cap = s.launches_asked, s.max_launches
    if cap == asked:
        return ""
    if s.launches_per_revision == asked:
        return f" (up to {cap} had a metric stayed inconclusive)"
    return f" (asked {asked}; pairs added while a metric was inconclusive, up to {cap})"
