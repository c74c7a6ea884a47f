"""Does one run's speedup interval hold for a re-run? Coverage over the ordered pairs of
several `kimi-bench run` (or `micro`) folders made at one commit on one machine.

For every ordered pair (A, B) of different runs: does A's micro speedup interval (the
deferred-vs-eager interval the report states and the terminal prints) cover B's median?
Each report is read back through ``load_report``, which recomputes its interval from the
raw repeats and their launches (``stats.launches.speedup_interval``) and refuses a report
whose stated interval disagrees. The spread's split (between launches or within) is
recomputed with the current function from the raw repeats.

Usage:
    python scripts/launch_coverage.py RUN_FOLDER... --out reports/calibration/cpu-launches

A run folder holds ``micro/report.json`` (a `run` folder) or ``report.json`` (a `micro`
folder); ``RUN_FOLDER.meta`` beside it, when there, holds lines ``commit <sha>``,
``start <time> loadavg <...>``, ``end <time> loadavg <...>`` and ``rc <code> wall_s <s>``
(written by the loop that made the runs) and is copied into the result.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kimi_bench.infra.stats.launches import rerun_interval, speedup_interval
from kimi_bench.report.model import load_report
from kimi_bench.report.roles import baseline_arm, change_arm


def _meta(folder: Path) -> dict[str, Any]:
    """What the loop recorded around the whole run: commit, loadavg before/after, wall."""
    path = folder.with_name(folder.name + ".meta")
    out: dict[str, Any] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(" ")
        if key in ("start", "end"):
            at, _, load = rest.partition(" loadavg ")
            out[f"{key}_at"], out[f"loadavg_{key}"] = at, load.strip()
        elif key == "commit":
            out["commit"] = rest.strip()
        elif key == "rc":
            rc, _, wall = rest.partition(" wall_s ")
            out["rc"], out["wall_s"] = int(rc), int(wall)
    return out


def one_run(folder: Path) -> dict[str, Any]:
    """A run's micro median, stated interval, launches, spread and host load."""
    path = folder / "micro" / "report.json"
    report = load_report(path if path.is_file() else folder / "report.json", "micro")
    s, cfg = report.summary, report.config
    arms = [str(a) for a in cfg["arms"]]
    base, change = baseline_arm(cfg, arms), change_arm(cfg, arms)
    iv = s["speedup_interval"]
    eager = report.data["repeats"][base]
    deferred = report.data["repeats"][change]
    ratios = [e["total_ms"] / d["total_ms"] for e, d in zip(eager, deferred, strict=True)]
    _, spread = speedup_interval(ratios, [int(d.get("launch", 0)) for d in deferred])
    one, _ = rerun_interval(ratios, [0] * len(ratios))  # as if one launch: the CI of before
    load = report.environment.get("host_load") or {}
    return {
        "run": folder.name,
        "commit": (report.environment.get("git") or {}).get("commit"),
        "median": s["speedup_median"],
        "low": iv["low"],
        "high": iv["high"],
        "kind": iv["kind"],
        "one_launch_ci": [one.low, one.high],
        "launches": s.get("launches_completed"),
        "repeats": s["repeats_completed"],
        "dominant": spread.dominant,
        "between_share": round(spread.between_share, 3),
        "launch_medians": [round(m, 4) for m in spread.launch_medians],
        "micro_load_1m": [
            (load.get("start") or {}).get("load_1m"),
            (load.get("end") or {}).get("load_1m"),
        ],
        "gate": _gate_line(folder),
        **_meta(folder),
    }


def _gate_line(folder: Path) -> str | None:
    """The gate's verdict of a `run` folder (its gate.md's first verdict line), if any."""
    gate = folder / "gate.md"
    if not gate.is_file():
        return None
    for line in gate.read_text().splitlines():
        if line.startswith("# gate"):
            return line.lstrip("# ")
    return None


def coverage(
    runs: list[dict[str, Any]], bounds: str = "stated"
) -> tuple[int, int, list[list[str]]]:
    """(covered, pairs, the misses as [A, B]) over the ordered pairs of different runs;
    ``bounds``: the stated interval, or ``one_launch_ci`` (the same repeats as one launch)."""
    covered, misses = 0, []
    pairs = [(a, b) for a in runs for b in runs if a is not b]
    for a, b in pairs:
        low, high = (a["low"], a["high"]) if bounds == "stated" else a[bounds]
        if low <= b["median"] <= high:
            covered += 1
        else:
            misses.append([a["run"], b["run"]])
    return covered, len(pairs), misses


def _load1(loadavg: str | None) -> str:
    """The 1-minute load of a /proc/loadavg line."""
    return loadavg.split()[0] if loadavg else "?"


def summary_md(runs: list[dict[str, Any]], covered: int, pairs: int, misses: list[Any]) -> str:
    rows = [
        "| run | commit | median | interval | launches x repeats | dominant (between share) "
        "| run load 1m before -> after | micro load 1m | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rows.append(
            f"| {r['run']} | {str(r.get('commit'))[:7]} | {r['median']:.3f}x | "
            f"{r['low']:.3f}-{r['high']:.3f}x ({r['kind']}) | {r['launches']} x "
            f"{r['repeats'] // max(1, r['launches'] or 1)} | {r['dominant']} "
            f"({r['between_share']:.0%}) | {_load1(r.get('loadavg_start'))} -> "
            f"{_load1(r.get('loadavg_end'))} | {r['micro_load_1m'][0]:.1f} -> "
            f"{r['micro_load_1m'][1]:.1f} | {r.get('wall_s', '?')} |"
        )
    rate = covered / pairs if pairs else float("nan")
    one = coverage(runs, "one_launch_ci")
    meds = [r["median"] for r in runs]
    head = [
        "# Does a run's micro speedup interval hold for a re-run? (CPU, this machine)",
        "",
        f"{len(runs)} default `kimi-bench run` one after another at one commit; over the "
        f"{pairs} ordered pairs (A, B), A's deferred-vs-eager interval (the 95% re-run "
        f"interval the report and terminal state) covers B's median in **{covered} of "
        f"{pairs} ({rate:.0%})**; the acceptance asks >= 90%.",
        "",
        f"Medians {min(meds):.3f}x .. {max(meds):.3f}x. Made by `scripts/launch_coverage.py`"
        " from the run folders (not committed: they are large); every report was read back "
        "through `load_report`, which recomputes its interval from the raw repeats and their "
        "launches.",
        "",
        *rows,
        "",
        f"Misses (A's interval, B's median): {misses or 'none'}.",
        "",
        f"For comparison, the bootstrap CI over the same repeats taken as one launch (what "
        f"micro stated before launches) covers the other run's median in {one[0]} of "
        f"{one[1]} pairs.",
        "",
    ]
    return "\n".join(head)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    runs = [one_run(f) for f in args.runs]
    covered, pairs, misses = coverage(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    one = coverage(runs, "one_launch_ci")
    doc = {"covered": covered, "pairs": pairs, "rate": covered / pairs if pairs else None,
           "misses": misses, "one_launch_ci_covered": one[0], "runs": runs}  # fmt: skip
    (args.out / "coverage.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "README.md").write_text(summary_md(runs, covered, pairs, misses))
    print(f"{covered} of {pairs} ordered pairs covered ({doc['rate']:.0%})")


if __name__ == "__main__":
    main()
