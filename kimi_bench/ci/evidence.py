"""Recompute, never trust: every figure the gate and ``compare`` use is derived here from
the raw data a report carries (micro: the per-repeat records; serve-ab: the per-request
rows; parity: the per-input rows).

Before anything is derived, the report goes through the report model's checks
(``report.model.validate_report``: types, then every derived block and summary number
against the raw data, ``report.agree``), the one place a report is checked; a report that
fails them raises :class:`EvidenceError` naming the field (the CLI's exit 2: the file
cannot be trusted). Completeness comes from the evidence: a report is complete only when
every planned (arm, repeat) or (rate, arm, repeat) is present with its raw rows, nothing
errored, and (for reports that carry the flag) the writer marked it final.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel

from kimi_bench.infra.stats.compare import Comparison
from kimi_bench.report.agree import micro_raw_of
from kimi_bench.report.agree_serve import derive_report
from kimi_bench.report.envelope import Count, Flag, Loose, RunConfig
from kimi_bench.report.kinds import MicroReport
from kimi_bench.report.model import Report, ReportError, validate_report
from kimi_bench.report.roles import baseline_arm
from kimi_bench.results import derive_parity, has_fp32, parity_rows
from kimi_bench.results.micro import MicroDerived, derive_micro
from kimi_bench.results.parity import ParityDerived
from kimi_bench.results.serve import ServeDerived

# per rate, each arm against the base arm: its comparisons by name (median_ttft, ...)
AB = dict[str, dict[str, dict[str, Comparison | None]]]


class EvidenceError(ReportError):
    """A report whose summary disagrees with its raw data, or whose raw data is invalid."""


class GateConfig(RunConfig):
    """The run's config as the evidence reads it: what was planned (a value of another
    type reads as not planned)."""

    requests: Loose[Count] = None
    repeats: Loose[Count] = None
    launches: Loose[Count] = None
    seed: Loose[Count] = None
    per_request: Loose[Flag] = None  # false: a peer's summary-only file
    capacity: Any = None  # a --capacity search (truthy)


@dataclass
class Derived:
    """One checked report and what its raw data gives, each derived at most once: the
    gate's evidence, its baseline metrics (``ci.metrics``) and ``calibrate`` share it."""

    report: Report

    @cached_property
    def config(self) -> GateConfig:
        return GateConfig.model_validate(self.report.config)

    @cached_property
    def micro(self) -> MicroDerived:
        return derive_micro(micro_raw_of(self.report.typed(MicroReport)))

    @cached_property
    def serve(self) -> ServeDerived:
        rep = self.report
        return derive_report(rep.config, rep.summary, rep.data["requests"])

    @cached_property
    def parity(self) -> ParityDerived:
        fp32 = self.fp32
        return derive_parity(parity_rows(self.report.results, fp32), fp32)

    @property
    def fp32(self) -> bool:
        return has_fp32(self.report.config)


class RunEnd(BaseModel):
    """Whether the writer marked the run final (reports from before the flag lack it)."""

    final: Flag | None = None


@dataclass
class ServeFigures:
    """A serve-ab report's gated figures: failed requests (from the rows, or a
    summary-only file's counts), the rates and arms planned, and the A/B comparisons."""

    failed: int
    rates: list[str]
    arms: list[str]
    change_arm: str | None
    ab: AB = field(default_factory=dict)
    summary_only: bool = False  # no request rows: nothing recomputed
    failed_unknown: bool = False  # the file does not count failed requests


@dataclass
class Evidence:
    """What the raw data of one report shows (one of micro, serve, parity, by kind)."""

    kind: str
    derived: Derived
    complete: bool = True
    incomplete_why: list[str] = field(default_factory=list)
    serve: ServeFigures | None = None

    def missing(self, why: str) -> None:
        self.complete = False
        self.incomplete_why.append(why)

    @property
    def micro(self) -> MicroDerived:
        return self.derived.micro


def where_of(report: Report) -> str:
    return str(report.source or f"{report.kind} report")


def checked(report: Report) -> Derived:
    """The report model's checks (types, derived blocks against raw data), as
    EvidenceError; what the report's raw data gives, derived once."""
    try:
        validate_report(report)
    except ReportError as exc:
        raise EvidenceError(str(exc)) from None
    return Derived(report)


# ------------------------------------------------------------------------------- micro


def micro_evidence(report: Report) -> Evidence:
    """The micro figures (``ev.micro``, ``results.micro``) from the per-repeat records
    (checked first: ``checked``), and whether every planned repeat is there."""
    derived = checked(report)
    w, cfg = where_of(report), derived.config
    arms = [str(a) for a in cfg.arms]
    base = baseline_arm(report.config, arms)
    if base not in arms or len(arms) < 2:
        raise EvidenceError(f"{w}: config.arms {arms!r} must hold the baseline and another arm")
    missing = [a for a in arms if not isinstance((report.data.get("repeats") or {}).get(a), list)]
    if missing:
        raise EvidenceError(f"{w}: repeats.{missing[0]} is missing: no raw data")
    ev, d = Evidence("micro", derived), derived.micro
    planned = cfg.repeats
    if planned is not None and cfg.launches is not None:
        planned *= max(1, cfg.launches)  # every launch runs the repeats
    for arm, f in d.arms.items():
        if planned is not None and f.total.n < planned:
            ev.missing(f"{arm}: {f.total.n} of {planned} repeats")
    change = d.arms.get(d.change)
    if change is not None and change.total.n and change.total.n != d.arms[d.baseline].total.n:
        raise EvidenceError(f"{w}: {base} and {d.change} have a different number of repeats")
    stopped(report, ev)
    return ev


def stopped(report: Report, ev: Evidence) -> None:
    """The run's own account: an error, an INCOMPLETE verdict, or not marked final."""
    s = report.header.summary
    if s.error:
        ev.missing(s.error)
    elif (s.verdict or "").upper().startswith("INCOMPLETE"):
        ev.missing(str(s.verdict))
    if RunEnd.model_validate(report.data).final is False:
        ev.missing("the report was not marked final (the run did not reach its end)")
