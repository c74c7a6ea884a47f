"""The revision A/B's report: ``report.json`` (the document ``ab.run_ab`` returns) and
``report.md`` (the same facts for a reader: both commits, the machine and its load, every
launch's figures, each metric's paired change and the verdict)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kimi_bench.report.writers import md_text


def _load(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def _revision(doc: dict[str, Any]) -> str:
    commit = doc["commit"]
    commit = ", ".join(commit) if isinstance(commit, list) else commit
    return (f"`{md_text(doc['given'])}` ({doc['source']}): commit `{commit}`, "
            f"{md_text(doc['version'])}")  # fmt: skip


def markdown(doc: dict[str, Any]) -> str:
    """report.md's text."""
    m, s, load = doc["machine"], doc["settings"], doc["host_load"]
    lines = [
        f"# kimi-bench ab: {doc['verdict']}",
        "",
        f"- base: {_revision(doc['base'])}",
        f"- candidate: {_revision(doc['candidate'])}",
        f"- machine: {md_text(m['host'])}, {m['device']} ({md_text(m['device_name'])}), "
        f"{m['cpu_count']} CPUs, torch {m['torch']}, Python {m['python']}",
        f"- host load (1 min): {_load(load['start']['load_1m'])} at the start, "
        f"{_load(load['end']['load_1m'])} at the end, on {load['end']['cpus']} usable CPUs",
        f"- {s['launches_per_revision']} launches per revision{_extended(s)}, order "
        f"{s['order']}; "
        f"micro: `{' '.join(s['micro'])}`; {doc['wall_s']:.0f} s in all",
        f"- gate: a metric fails when the candidate is worse by more than "
        f"{s['max_regression']:.0%} and the {s['confidence']:.0%} interval excludes no "
        f"change; interval: {s['method']}; a launch's figure: {s['figure_means']}",
        "",
        "## Metrics",
        "",
    ]
    lines += [f"- {md_text(x['sentence'])}" for x in doc["metrics"]]
    lines += [
        "",
        "## Launches",
        "",
        f"| # | pair | revision | deferred ms ({s['figure']}) | eager ms ({s['figure']}) "
        "| speedup | repeats | bit-exact | load 1m | wall s | commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for la in doc["launches"]:
        lines.append(
            f"| {la['position'] + 1} | {la['pair'] + 1} | {la['side']} | {la['deferred_ms']:.3f} "
            f"| {la['eager_ms']:.3f} | {la['speedup']:.3f} | {la['repeats']} "
            f"| {'yes' if la['bit_exact'] else 'NO'} | {_load(la['load_1m'])} "
            f"| {la['wall_s']:.1f} | `{(la['commit'] or 'unknown')[:12]}` |"
        )
    return "\n".join(lines) + "\n"


def write(doc: dict[str, Any], out: Path) -> list[Path]:
    """report.md, then report.json (last: a folder with it holds the whole report)."""
    md, js = out / "report.md", out / "report.json"
    md.write_text(markdown(doc), encoding="utf-8")
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(js)
    return [js, md]


def _extended(s: dict[str, Any]) -> str:
    """`` (asked 6; pairs added while a metric was inconclusive, up to 12)`` or ""."""
    asked, cap = s.get("launches_asked"), s.get("max_launches")
    if asked is None or cap is None or cap == asked:
        return ""
    if s["launches_per_revision"] == asked:
        return f" (up to {cap} had a metric stayed inconclusive)"
    return f" (asked {asked}; pairs added while a metric was inconclusive, up to {cap})"
