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
from typing import Any

from kimi_bench.infra.stats import Measurement
from kimi_bench.report.agree import micro_raw
from kimi_bench.report.model import Report, ReportError, validate_report
from kimi_bench.report.roles import baseline_arm
from kimi_bench.results.micro import MicroDerived, derive_micro


class EvidenceError(ReportError):
    """A report whose summary disagrees with its raw data, or whose raw data is invalid."""


@dataclass
class Evidence:
    """What the raw data of one report shows."""

    kind: str
    complete: bool = True
    incomplete_why: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    measurements: dict[str, Measurement] = field(default_factory=dict)
    micro: MicroDerived | None = None  # a micro report's figures

    def missing(self, why: str) -> None:
        self.complete = False
        self.incomplete_why.append(why)


def where_of(report: Report) -> str:
    return str(report.source or f"{report.kind} report")


def checked(report: Report) -> None:
    """The report model's checks (types, derived blocks against raw data), as EvidenceError."""
    try:
        validate_report(report)
    except ReportError as exc:
        raise EvidenceError(str(exc)) from None


# ------------------------------------------------------------------------------- micro


def micro_evidence(report: Report) -> Evidence:
    """The micro figures (``ev.micro``, ``results.micro``) from the per-repeat records
    (checked first: ``checked``), and whether every planned repeat is there."""
    checked(report)
    w, cfg = where_of(report), report.config
    arms = [str(a) for a in cfg.get("arms") or []]
    base = baseline_arm(cfg, arms)
    if base not in arms or len(arms) < 2:
        raise EvidenceError(f"{w}: config.arms {arms!r} must hold the baseline and another arm")
    missing = [a for a in arms if not isinstance((report.data.get("repeats") or {}).get(a), list)]
    if missing:
        raise EvidenceError(f"{w}: repeats.{missing[0]} is missing: no raw data")
    d = derive_micro(micro_raw(report.to_dict()))
    ev = Evidence("micro", micro=d)
    planned = cfg.get("repeats")
    if isinstance(planned, int) and isinstance(cfg.get("launches"), int):
        planned *= max(1, cfg["launches"])  # every launch runs the repeats
    for arm, f in d.arms.items():
        if isinstance(planned, int) and f.total.n < planned:
            ev.missing(f"{arm}: {f.total.n} of {planned} repeats")
    change = d.arms.get(d.change)
    if change is not None and change.total.n and change.total.n != d.arms[d.baseline].total.n:
        raise EvidenceError(f"{w}: {base} and {d.change} have a different number of repeats")
    stopped(report, ev)
    return ev


def stopped(report: Report, ev: Evidence) -> None:
    """The run's own account: an error, an INCOMPLETE verdict, or not marked final."""
    s = report.summary
    if s.get("error"):
        ev.missing(str(s["error"]))
    elif str(s.get("verdict") or "").upper().startswith("INCOMPLETE"):
        ev.missing(str(s["verdict"]))
    final = report.data.get("final")
    if final is not None and final is not True:
        ev.missing("the report was not marked final (the run did not reach its end)")
