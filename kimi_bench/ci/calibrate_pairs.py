"""Which runs ``calibrate`` compares with which: A/A pairs on the calibration machine
(in-sample: the thresholds are chosen on them) and across machines (out-of-sample: a
baseline from one machine, a candidate from another, as in CI when the committed
baselines come from a machine the job does not run on).

A run is one report of a gated kind (micro, serve-ab) with the machine it ran on (a label:
the calibration set, or one ``--holdout`` folder each) and its setup: the kind, device and
the config keys that make two runs comparable (``ci.comparable.SETUP_KEYS``). Only runs of
one setup are ever paired.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kimi_bench.ci.comparable import SETUP_KEYS
from kimi_bench.ci.evidence import Derived
from kimi_bench.report.envelope import Loose, Open, RunConfig
from kimi_bench.report.model import Report

CALIBRATION = "calibration"  # the machine label of the runs the thresholds are chosen on


@dataclass(frozen=True)
class Run:
    report: Report
    machine: str
    index: int  # order within its machine (the order the runs were given)

    @cached_property
    def derived(self) -> Derived:
        """Its figures, derived once for every metric and pair it is in."""
        return Derived(self.report)

    @property
    def carrier(self) -> str:
        return str(self.report.header.config.transport or "n/a")

    @property
    def setup(self) -> str:
        return setup_key(self.report)

    @property
    def label(self) -> str:
        return f"{self.machine}#{self.index}"


class Profile(Open):
    name: Any = None


class SetupConfig(RunConfig):
    """What a run's setup is named by, beyond ``RunConfig``."""

    runtime_profile: Loose[Profile | str] = None
    content: Any = None

    @property
    def profile(self) -> object:
        p = self.runtime_profile
        return p.name if isinstance(p, Profile) else p


def setup_key(report: Report) -> str:
    """What two runs must share to be an A/A pair (kind, device, setup keys)."""
    env, cfg = report.header.environment, SetupConfig.model_validate(report.config)
    parts: list[Any] = [report.kind, env.device, env.device_name]
    parts += [report.config.get(k) for k in SETUP_KEYS.get(report.kind, ())]  # as written
    parts.append(cfg.profile)
    return json.dumps(parts, sort_keys=True, default=str)


def setup_text(report: Report) -> str:
    """A short name of a run's setup: ``micro 8 ranks shm sglang-0.5.23 random``."""
    cfg = SetupConfig.model_validate(report.config)
    name = cfg.profile if isinstance(cfg.runtime_profile, Profile) else cfg.runtime
    bits = [report.kind, f"{cfg.ranks} ranks", str(cfg.transport), str(name)]
    if cfg.content:
        bits.append(str(cfg.content))
    return " ".join(bits)


@dataclass(frozen=True)
class Pair:
    reference: Run  # the baseline
    candidate: Run

    @property
    def carrier(self) -> str:
        return self.candidate.carrier

    @property
    def machines(self) -> str:
        return f"{self.reference.machine} -> {self.candidate.machine}"


def in_sample_pairs(runs: Sequence[Run]) -> list[Pair]:
    """Consecutive runs of one setup on the calibration machine: (1st, 2nd), (3rd, 4th), ...
    of each setup, in the order given (A, B, A, B: each run in one pair only)."""
    by_setup: dict[str, list[Run]] = {}
    for run in runs:
        by_setup.setdefault(run.setup, []).append(run)
    pairs = []
    for group in by_setup.values():
        pairs += [Pair(group[i], group[i + 1]) for i in range(0, len(group) - 1, 2)]
    return pairs


def cross_machine_pairs(runs: Sequence[Run]) -> list[Pair]:
    """Every ordered (baseline, candidate) of one setup whose runs come from two different
    machines: both directions, since either machine may hold the committed baseline."""
    return [
        Pair(a, b)
        for a in runs
        for b in runs
        if a is not b and a.machine != b.machine and a.setup == b.setup
    ]
