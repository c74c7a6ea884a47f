"""``kimi-bench ab``: two revisions measured on this machine in one job, launch by launch.

Each revision's ``micro`` (arms eager and deferred) runs as its own process launch, the
two revisions interleaved A B, B A, A B, ... (``ab_stats.launch_order``), so that a drift of
the host (another job starting, a frequency change) hits both. Every launch writes its
own micro report under ``<out>/launches/``; the A/B reads each launch's medians from it
and gates the candidate against the base with the paired interval of ``ab_stats``: the
deferred arm's time and its speedup over eager (eager measured in the same launch).
While a metric is inconclusive after ``--launches`` pairs, one more pair runs at a time, up to
``--max-launches`` (the report says how many ran and why).

Exit codes: 0 no regression, 1 a regression (or a candidate launch that failed), 2 refused
(a revision that cannot be resolved or built, a base launch that failed)."""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from kimi_bench.ci.ab_report import (
    AbDoc,
    AbSettings,
    HostLoad,
    Launch,
    LoadSnapshot,
    Machine,
    RevisionDoc,
)
from kimi_bench.ci.ab_stats import (
    METHOD,
    PairedChange,
    deferred_bound,
    launch_order,
    paired_change,
)
from kimi_bench.ci.revisions import Revision, ask_version, resolve
from kimi_bench.options.ab import AbOptions
from kimi_bench.report.envelope import Header
from kimi_bench.report.kinds import MicroArm

SCHEMA = 1
METRICS = (("deferred_ms", "lower"), ("speedup", "higher"))
FIGURES = {
    "min": "each arm's fastest measured repeat in the launch (speedup: eager's over deferred's)",
    "median": "each arm's median over the launch's repeats (speedup: eager's over deferred's)",
}
LAUNCH_ENV = {"KIMI_BENCH_FIGURES": "0"}  # no figures in a launch: only its numbers are read


class LaunchFailed(RuntimeError):
    """A launch of one revision did not finish with a report (``side``: which revision)."""

    def __init__(self, side: str, message: str) -> None:
        super().__init__(message)
        self.side = side


def load_snapshot() -> LoadSnapshot:
    """The host's load averages now (NaN where the OS has none) and its usable CPUs."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        one = five = fifteen = math.nan
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return LoadSnapshot(load_1m=one, load_5m=five, load_15m=fifteen, cpus=cpus, at=now)


class LaunchSummary(BaseModel):
    repeats_completed: int
    bit_exact_all_repeats: bool | None = None
    eager_median_ms: float | None = None
    deferred_median_ms: float | None = None


class LaunchReport(Header):
    """What the A/B reads of a launch's micro report."""

    summary: LaunchSummary  # type: ignore[assignment]
    arms: dict[str, MicroArm]

    def figure(self, arm: str, figure: str) -> float:
        """One arm's figure: the fastest of its measured repeats (``min``) or the median
        the report gives (``median``)."""
        if figure == "median":
            v = getattr(self.summary, f"{arm}_median_ms")
            if v is None:
                raise KeyError(f"{arm}_median_ms")
            return float(v)
        return float(min(self.arms[arm].total_ms.samples))


def _figures(
    rev: Revision, where: tuple[int, int], folder: Path, wall: float, figure: str
) -> Launch:
    """The launch's figures from its report.json (``where``: pair, position)."""
    pair, position = where
    try:
        doc = LaunchReport.model_validate_json((folder / "report.json").read_bytes())
        s, env = doc.summary, doc.environment
        start = env.host_load.start if env.host_load else None
        deferred, eager = doc.figure("deferred", figure), doc.figure("eager", figure)
        return Launch(
            position=position, pair=pair, side=rev.label, folder=str(folder),
            wall_s=round(wall, 2), deferred_ms=deferred, eager_ms=eager,
            speedup=eager / deferred, repeats=s.repeats_completed,
            bit_exact=bool(s.bit_exact_all_repeats), load_1m=(start or {}).get("load_1m"),
            commit=env.git.commit if env.git else None, version=env.package_version,
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LaunchFailed(rev.label, f"{rev.label} launch {position + 1}: no usable "
                           f"report in {folder}: {exc}") from None  # fmt: skip


def run_launch(opts: AbOptions, rev: Revision, pair: int, position: int, out: Path) -> Launch:
    """One launch of ``rev``'s micro into ``out/launches/NN-<side>``; its console output
    goes to ``launch.log`` beside the report."""
    folder = out / "launches" / f"{position + 1:02d}-{rev.label}"
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [*rev.command, *opts.micro_command(), "--output-dir", str(folder), "--overwrite"]
    t0 = time.monotonic()
    with open(folder / "launch.log", "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            done = subprocess.run(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=os.environ | LAUNCH_ENV | rev.env,
                cwd=folder, timeout=opts.timeout_s, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise LaunchFailed(
                rev.label,
                f"{rev.label} launch {position + 1} ran past "
                f"{opts.timeout_s:g} s (log: {folder / 'launch.log'})",
            ) from None
    wall = time.monotonic() - t0
    if done.returncode != 0:
        tail = (folder / "launch.log").read_text(encoding="utf-8", errors="replace")
        last = (tail.strip().splitlines() or [""])[-1]
        raise LaunchFailed(rev.label, f"{rev.label} launch {position + 1} exited "
                           f"{done.returncode}: {last} (log: {folder / 'launch.log'})")  # fmt: skip
    return _figures(rev, (pair, position), folder, wall, opts.figure)


def resolve_both(opts: AbOptions) -> tuple[Revision, Revision]:
    """Both revisions, built when refs, each answering ``--version`` (RevisionError)."""
    base = resolve("base", opts.base, opts.repo, opts.cache)
    cand = resolve("candidate", opts.candidate, opts.repo, opts.cache)
    return ask_version(base), ask_version(cand)


def _commit(rev: Revision, launches: list[Launch]) -> RevisionDoc:
    seen = sorted({la.commit or "unknown" for la in launches if la.side == rev.label})
    commit = rev.commit or (seen[0] if len(seen) == 1 else seen)
    return RevisionDoc(label=rev.label, given=rev.given, source=rev.source,
                       command=list(rev.command), commit=commit, version=rev.version)  # fmt: skip


def _metrics(launches: list[Launch], opts: AbOptions) -> list[PairedChange]:
    pairs = sorted({la.pair for la in launches})
    by = {(la.pair, la.side): la for la in launches}
    out = {}
    for name, better in METRICS:
        base = [getattr(by[(p, "base")], name) for p in pairs]
        cand = [getattr(by[(p, "candidate")], name) for p in pairs]
        out[name] = paired_change(
            name, base, cand, better=better,  # type: ignore[arg-type]
            threshold=opts.max_regression, confidence=opts.confidence,
        )  # fmt: skip
    return [out["deferred_ms"], deferred_bound(out["speedup"], out["deferred_ms"])]


def _undecided(launches: list[Launch], opts: AbOptions) -> bool:
    return any(m.verdict == "inconclusive" for m in _metrics(launches, opts))


def run_ab(
    opts: AbOptions,
    base: Revision,
    cand: Revision,
    out: Path,
    progress: Callable[[Launch, int], None] | None = None,
) -> AbDoc:
    """Every launch in A B, B A order, then the report's document (``exit_code`` in it)."""
    start = load_snapshot()
    t0 = time.monotonic()
    launches: list[Launch] = []
    planned = opts.launches
    for position, (pair, side) in enumerate(launch_order(opts.launch_cap)):
        if pair >= planned:
            break
        rev = base if side == "base" else cand
        launches.append(run_launch(opts, rev, pair, position, out))
        if progress is not None:
            progress(launches[-1], 2 * planned)
        whole = len(launches) == 2 * planned
        if whole and planned < opts.launch_cap and _undecided(launches, opts):
            planned += 1  # one more pair while a metric is undecided
    metrics = _metrics(launches, opts)
    failed = [m for m in metrics if m.verdict == "regression"]
    first = Path(launches[0].folder, "report.json").read_bytes()
    env = LaunchReport.model_validate_json(first).environment
    machine = Machine(host=socket.gethostname(), platform=platform.platform(),
                      device=env.device, device_name=env.device_name, cpu_count=env.cpu_count,
                      torch=env.torch, python=env.python)  # fmt: skip
    settings = AbSettings(
        launches_per_revision=planned, launches_asked=opts.launches,
        max_launches=opts.launch_cap, order="A B, B A, A B, ...", micro=opts.micro_command(),
        max_regression=opts.max_regression, confidence=opts.confidence, method=METHOD,
        figure=opts.figure, figure_means=FIGURES[opts.figure],
    )  # fmt: skip
    return AbDoc(
        schema_version=SCHEMA, created=start.at, wall_s=round(time.monotonic() - t0, 1),
        base=_commit(base, launches), candidate=_commit(cand, launches), machine=machine,
        host_load=HostLoad(start=start, end=load_snapshot()), settings=settings,
        launches=launches, metrics=metrics,
        verdict="FAIL" if failed else "PASS", exit_code=1 if failed else 0,
        failed_metrics=[m.metric for m in failed],
    )  # fmt: skip
