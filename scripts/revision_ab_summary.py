"""Summarize a calibration of ``kimi-bench ab`` (scripts/revision-ab-calibration.sh): how many
A/A runs failed, how many runs with a slower candidate were caught, each run's estimates
and the host load, as OUTDIR/summary.md and a compact OUTDIR/summary.json.

    python3 scripts/revision_ab_summary.py OUTDIR --slowdown 0.2 --pairs 20
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any


def _run(folder: Path) -> dict[str, Any]:
    """One A/B run: its exit code (from the log when no report), verdict and estimates."""
    log = folder.with_suffix(".log")
    report = folder / "report.json"
    if not report.is_file():
        text = log.read_text(errors="replace") if log.is_file() else ""
        last = (text.strip().splitlines() or ["no log"])[-1]
        return {"run": folder.name, "exit_code": None, "verdict": "no report", "note": last}
    doc = json.loads(report.read_text())
    loads = [la["load_1m"] for la in doc["launches"] if la.get("load_1m") is not None]
    metrics = {
        m["metric"]: {k: round(m[k], 4) for k in ("estimate", "low", "high")}
        | {"verdict": m["verdict"]}
        for m in doc["metrics"]
    }
    return {
        "run": folder.name,
        "exit_code": doc["exit_code"],
        "verdict": doc["verdict"],
        "failed_metrics": doc["failed_metrics"],
        "metrics": metrics,
        "launches": len(doc["launches"]),
        "wall_s": doc["wall_s"],
        "load_1m": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)}
        if loads
        else None,
        "commits": [doc["base"]["commit"], doc["candidate"]["commit"]],
    }


def _pair_logs(out: Path, run: str, metric: str) -> list[float]:
    """One run's per-pair log ratios of ``metric`` (positive: the candidate worse)."""
    doc = json.loads((out / run / "report.json").read_text())
    changes = next(m["pair_changes"] for m in doc["metrics"] if m["metric"] == metric)
    return [math.log1p(c) for c in changes]


def detection(
    out: Path, runs: list[dict[str, Any]], metric: str, threshold: float
) -> dict[str, Any] | None:
    """The spread of one launch pair's log ratio (pooled over the runs, each run's own mean
    taken out, so the slower runs count too) and, from it, the smallest regression that
    ``L`` launch pairs catch in 95% of runs (interval excluding 0 at a two-sided 95% paired
    t interval, and the estimate over ``threshold``), with se = sd / sqrt(L):
    exp(max((t(0.975, L-1) + t(0.95, L-1)) * se, log(1 + threshold) + t(0.95, L-1) * se)) - 1
    (the sd taken as known)."""
    from scipy.stats import t

    sq, dof = 0.0, 0
    for r in runs:
        if r.get("metrics"):
            logs = _pair_logs(out, r["run"], metric)
            mean = sum(logs) / len(logs)
            sq += sum((v - mean) ** 2 for v in logs)
            dof += len(logs) - 1
    if dof < 2:
        return None
    sd = math.sqrt(sq / dof)
    mde = {}
    for n in (3, 6, 10, 20, 40):
        se, t95 = sd / math.sqrt(n), t.ppf(0.95, n - 1)
        # caught: the interval excludes 0 AND the estimate is over the threshold
        need = max((t.ppf(0.975, n - 1) + t95) * se, math.log1p(threshold) + t95 * se)
        mde[str(n)] = round(math.expm1(need), 3)
    return {"pair_log_sd": round(sd, 4), "dof": dof, "detectable_at_95pct_by_launch_pairs": mde}


def summarize(out: Path, slowdown: float, pairs: int) -> dict[str, Any]:
    runs = {
        kind: [_run(p) for p in sorted(out.glob(f"{kind}-[0-9][0-9]")) if p.is_dir()]
        for kind in ("aa", "slower")
    }
    aa, slow = runs["aa"], runs["slower"]
    aa_fail = sum(r["exit_code"] == 1 for r in aa)
    caught = sum(r["exit_code"] == 1 for r in slow)
    first = next((json.loads((out / r["run"] / "report.json").read_text()) for r in aa + slow
                  if r["exit_code"] is not None), None)  # fmt: skip
    loads = [r["load_1m"]["median"] for r in aa + slow if r.get("load_1m")]
    est = {
        kind: {
            m: [r["metrics"][m]["estimate"] for r in rs if r.get("metrics")]
            for m in ("deferred_ms", "speedup")
        }
        for kind, rs in runs.items()
    }
    return {
        "slowdown": slowdown,
        "planned_pairs": pairs,
        "aa": {"ran": sum(r["exit_code"] is not None for r in aa), "failed": aa_fail},
        "slower": {"ran": sum(r["exit_code"] is not None for r in slow), "caught": caught},
        "acceptance": {
            "aa_fails_at_most": max(1, round(0.05 * pairs)),
            "slower_caught_at_least": pairs - max(1, round(0.05 * pairs)),
        },
        "settings": first["settings"] if first else None,
        "machine": first["machine"] if first else None,
        "commit": first["base"]["commit"] if first else None,
        "host_load_1m_median_per_run": {
            "min": min(loads),
            "median": statistics.median(loads),
            "max": max(loads),
        }
        if loads
        else None,
        "estimates": est,
        "detection": {
            m: detection(out, aa + slow, m, first["settings"]["max_regression"] if first else 0.1)
            for m in ("deferred_ms", "speedup")
        },
        "runs": aa + slow,
    }


def _range(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (f"median {statistics.median(values):+.1%}, range {min(values):+.1%} .. "
            f"{max(values):+.1%}")  # fmt: skip


def _met(met: bool, kind: dict[str, Any], s: dict[str, Any]) -> str:
    """met / NOT met; with runs missing, NOT met once no outcome of them could meet it."""
    planned, acc = s["planned_pairs"], s["acceptance"]
    missing = planned - kind["ran"]
    if missing <= 0:
        return "met" if met else "NOT met"
    if "caught" in kind and kind["caught"] + missing < acc["slower_caught_at_least"]:
        return f"NOT met (only {kind['ran']} of {planned} ran: the rest cannot make up for it)"
    if "failed" in kind and kind["failed"] > acc["aa_fails_at_most"]:
        return f"NOT met ({kind['ran']} of {planned} ran)"
    return f"not decided: {kind['ran']} of {planned} ran (time budget)"


def markdown(s: dict[str, Any]) -> str:
    acc, aa, slow = s["acceptance"], s["aa"], s["slower"]
    settings, load = s["settings"] or {}, s["host_load_1m_median_per_run"]
    met_aa = aa["ran"] >= s["planned_pairs"] and aa["failed"] <= acc["aa_fails_at_most"]
    met_slow = slow["ran"] >= s["planned_pairs"] and slow["caught"] >= acc["slower_caught_at_least"]
    lines = [
        f"# kimi-bench ab calibration: {s['planned_pairs']} A/A + {s['planned_pairs']} "
        f"at +{s['slowdown']:.0%} deferred work",
        "",
        f"- commit `{s['commit']}`; machine: {json.dumps(s['machine'])}",
        f"- each run: `{' '.join(settings.get('micro', []))}`, "
        f"{settings.get('launches_per_revision')} launches per revision, "
        f"max regression {settings.get('max_regression')}, {settings.get('method')}",
        "- host load (1-minute average at each launch's start; per run its median): "
        + (
            f"min {load['min']:.1f}, median {load['median']:.1f}, max {load['max']:.1f}"
            if load
            else "n/a"
        ),
        f"- **A/A: {aa['failed']} failed of {aa['ran']} run(s)** (acceptance: at most "
        f"{acc['aa_fails_at_most']} of {s['planned_pairs']}): " + _met(met_aa, aa, s),
        f"- **slower candidate: {slow['caught']} caught of {slow['ran']} run(s)** (acceptance: "
        f"at least {acc['slower_caught_at_least']} of {s['planned_pairs']}): "
        + _met(met_slow, slow, s),
        "",
        "Estimates (candidate vs base, + is worse):",
        "",
    ]
    for kind, label in (("aa", "A/A"), ("slower", "slower")):
        for m, vals in s["estimates"][kind].items():
            lines.append(f"- {label} {m}: {_range(vals)}")
    lines += ["", "Spread between launches and what it lets the A/B detect (95% of runs "
              "caught, paired t interval at 95%, normal approximation):", ""]  # fmt: skip
    for m, d in s["detection"].items():
        if d:
            by = ", ".join(f"{k} pairs {v:+.0%}" for k, v in
                           d["detectable_at_95pct_by_launch_pairs"].items())  # fmt: skip
            lines.append(f"- {m}: one pair's log ratio sd {d['pair_log_sd']:.3f} "
                         f"({d['dof']} dof); detectable: {by}")  # fmt: skip
    lines += ["", "| run | exit | verdict | deferred_ms | speedup | load 1m (median) | wall s |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in s["runs"]:
        ms = r.get("metrics") or {}
        cells = [
            f"{ms[m]['estimate']:+.1%} ({ms[m]['low']:+.1%}..{ms[m]['high']:+.1%}) "
            f"{ms[m]['verdict']}"
            if m in ms
            else "-"
            for m in ("deferred_ms", "speedup")
        ]
        ld = r.get("load_1m")
        lines.append(
            f"| {r['run']} | {r['exit_code']} | {r['verdict']} | {cells[0]} | {cells[1]} "
            f"| {ld['median']:.1f} | {r.get('wall_s', '-')} |"
            if ld
            else f"| {r['run']} | {r['exit_code']} | {r['verdict']} | {cells[0]} | {cells[1]} "
            f"| - | {r.get('wall_s', '-')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--slowdown", type=float, required=True)
    ap.add_argument("--pairs", type=int, required=True)
    args = ap.parse_args()
    s = summarize(args.out, args.slowdown, args.pairs)
    text = markdown(s)
    (args.out / "summary.md").write_text(text)
    (args.out / "summary.json").write_text(json.dumps(s, separators=(",", ":"), default=str))
    print(text, end="")


if __name__ == "__main__":
    main()
