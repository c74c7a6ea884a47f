"""serve-ab's capacity mode (``--capacity``, issue 43): per arm, the highest request rate
whose goodput meets the ``--goodput`` SLOs, found by bisection.

A rate *meets* the SLOs when at least ``--capacity-goodput-share`` of its requests completed
and met every SLO, and the arm kept up with its arrivals (``serve_breakdown.keep_up``: its
first tokens came out at no less than ``ACHIEVED_SHARE`` of the pace the requests came in;
an arm that falls behind is saturated there, whatever its latencies). The search probes
``--capacity-min-rate`` and ``--capacity-max-rate``, then the geometric midpoint of the
bracket (rounded to 3 significant digits) until the bracket's width is at most
``--capacity-resolution`` of its upper end. Every arm sees the same seeded trace at a
given rate (the same workload, the same arrivals). The capacity is the bracket's lower end;
the true one lies in [low, high)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kimi_bench.bench.serve_arms import Arm
from kimi_bench.bench.serve_report import derive_rows, request_rows, run_throughput
from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.options import ServeOptions
from kimi_bench.pipeline import with_role
from kimi_bench.results.serve_breakdown import keep_up

ACHIEVED_SHARE = 0.9
MAX_PROBES = 24  # per arm, a bound on the bisection whatever the options


@dataclass
class Probe:
    offered: float
    achieved: float
    keep_up: float | None
    completed: int
    good: int
    requests: int
    met: bool

    def as_dict(self) -> dict[str, Any]:
        return {"offered_req_per_s": self.offered, "achieved_req_per_s": self.achieved,
                "keep_up": self.keep_up,
                "completed": self.completed, "good_requests": self.good,
                "requests": self.requests, "met": self.met}  # fmt: skip


@dataclass
class ArmCapacity:
    probes: list[Probe] = field(default_factory=list)
    low: float | None = None  # highest rate that met the SLOs
    high: float | None = None  # lowest rate that did not

    @property
    def status(self) -> str:
        if self.low is None and self.high is None:
            return "searching"
        if self.low is None:
            return "below the lowest rate tried"
        if self.high is None:
            return "at or above the highest rate tried"
        return "found"


def _pairs(run: ServeRun) -> list[tuple[float, float]]:
    """(scheduled, first token) seconds of the run's served requests."""
    out = []
    for r in run.records:
        times = r.client.times_s if r.ok and r.client is not None else {}
        s, f = times.get("scheduled"), times.get("first_token")
        if s is not None and f is not None:
            out.append((s, f))
    return out


def round3(x: float) -> float:
    return float(f"{x:.3g}")


class CapacitySearch:
    """The bisection of every arm (a ``serve_http.Search``); the result in ``doc()``."""

    def __init__(self, opts: ServeOptions) -> None:
        self.opts = opts
        self.slos = opts.slos
        self.rates: list[float] = []  # every rate probed, in order of first use
        self.arms: dict[str, ArmCapacity] = {}

    def index(self, rate: float) -> int:
        if rate not in self.rates:
            self.rates.append(rate)
        return self.rates.index(rate)

    def judge(self, run: ServeRun, rate: float) -> Probe:
        good = derive_rows(request_rows([run]), self.opts).good_requests or 0
        done = sum(1 for r in run.records if r.ok)
        achieved = run_throughput(run)
        n = max(1, len(run.records) + run.unsent)
        keep = keep_up(_pairs(run))
        met = (good >= self.opts.capacity_goodput_share * n and run.error is None
               and (keep is None or keep >= ACHIEVED_SHARE))  # fmt: skip
        return Probe(rate, achieved, keep, done, good, n, met)

    def __call__(
        self,
        arms: list[Arm],
        probe: Callable[[Arm, float, int], ServeRun],
        after: Callable[[], None] | None = None,
    ) -> None:
        """Bisect each arm; ``after()`` runs once each probe is judged (the partial report
        on disk then holds it: a run killed later loses no judged probe)."""
        for arm in arms:
            found = self.arms.setdefault(arm.name, ArmCapacity())

            def attempt(rate: float, arm: Arm = arm, found: ArmCapacity = found) -> bool:
                result = self.judge(probe(arm, rate, self.index(rate)), rate)
                found.probes.append(result)
                if after is not None:
                    after()
                return result.met

            self._bisect(found, attempt)

    def _bisect(self, found: ArmCapacity, attempt: Callable[[float], bool]) -> None:
        lo, hi = self.opts.capacity_min_rate, self.opts.capacity_max_rate
        if not attempt(lo):
            found.high = lo
            return
        found.low = lo
        if attempt(hi):
            found.low = hi
            return
        found.high = hi
        for _ in range(MAX_PROBES):
            low, high = found.low, found.high
            assert low is not None and high is not None
            if (high - low) <= self.opts.capacity_resolution * high:
                return
            mid = round3(math.sqrt(low * high))
            if not low < mid < high:
                return  # the rounding cannot split the bracket further
            if attempt(mid):
                found.low = mid
            else:
                found.high = mid

    def doc(self) -> dict[str, Any]:
        """``data.capacity``: each arm's capacity, bracket and probes; each arm's gain over
        the baseline arm (eager) where both were found."""
        arms = {
            name: {"capacity_req_per_s": c.low, "bracket": [c.low, c.high], "status": c.status,
                   "probes": [p.as_dict() for p in c.probes]}
            for name, c in self.arms.items()
        }  # fmt: skip
        base = with_role(list(self.arms), "baseline") or next(iter(self.arms), None)
        gains: dict[str, float | None] = {}
        base_cap = self.arms[base].low if base else None
        for name, c in self.arms.items():
            if name == base:
                continue
            # a bound when either capacity lies at an end of the range (the notes say so)
            gains[name] = None
            if base_cap is not None and c.low is not None:
                gains[name] = (c.low / base_cap - 1) * 100
        return {"slos": self.slos, "resolution": self.opts.capacity_resolution,
                "min_rate": self.opts.capacity_min_rate, "max_rate": self.opts.capacity_max_rate,
                "goodput_share": self.opts.capacity_goodput_share,
                "achieved_share": ACHIEVED_SHARE, "baseline": base, "arms": arms,
                "gain_pct_vs_baseline": gains}  # fmt: skip


def capacity_notes(doc: dict[str, Any]) -> list[str]:
    """The capacity in words: each arm's rate and bracket, and the gains."""
    slo = " ".join(f"{k}:{v:g}" for k, v in doc["slos"].items())
    res = f"{doc['resolution']:.0%}"
    out = []
    for name, a in doc["arms"].items():
        low, high = a["bracket"]
        if a["status"] == "found":
            out.append(f"capacity {name}: {low:g} req/s meets {slo} ({high:g} does not; "
                       f"resolution {res} of the upper end)")  # fmt: skip
        elif a["status"] == "searching":
            out.append(f"capacity {name}: searching ({len(a['probes'])} rates tried so far)")
        elif low is None:
            out.append(f"capacity {name}: below {high:g} req/s, the lowest rate tried "
                       f"(it did not meet {slo})")  # fmt: skip
        else:
            out.append(f"capacity {name}: at least {low:g} req/s, the highest rate tried "
                       f"(it met {slo}); raise --capacity-max-rate")  # fmt: skip
    for name, gain in doc["gain_pct_vs_baseline"].items():
        said = "not measured (a capacity not found)" if gain is None else f"{gain:+.1f}%"
        out.append(f"capacity gain {name} vs {doc['baseline']}: {said}")
    return out


def capacity_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """``data.capacity_rows``: one row per arm for the report's table."""
    rows = []
    for name, a in doc["arms"].items():
        low, high = a["bracket"]
        at = [p for p in a["probes"] if p["offered_req_per_s"] == low]
        achieved = at[-1]["achieved_req_per_s"] if at else None
        rows.append({"arm": name, "capacity_req_per_s": low, "achieved_req_per_s": achieved,
                     "next_rate_failed": high,
                     "status": a["status"], "probes": len(a["probes"]),
                     "gain_pct": doc["gain_pct_vs_baseline"].get(name)})  # fmt: skip
    return rows


def in_rate_order(
    search: CapacitySearch, runs: list[ServeRun]
) -> tuple[tuple[float, ...], list[ServeRun]]:
    """The probed rates in ascending order, and the runs placed by that order (the report's
    tables list rates as the fixed-rate mode does)."""
    rates = tuple(sorted(search.rates))
    where = {rate: i for i, rate in enumerate(rates)}
    placed = [replace(run, at=replace(run.at, rate_index=where[run.at.rate])) for run in runs]
    return rates, placed
