"""Relative gate rules: find the baseline report of the same setup and compare named
metrics (``ci.metrics``) against it.

A relative rule fails only when the new median is worse than the baseline's by more than
``max_regression`` AND a one-sided Mann-Whitney U test on the raw samples says the shift
is beyond noise (p < ``alpha``). A metric that moves with the eager arm too
(``micro.speedup``, ``micro.<arm>.over_yardstick``) does not fail when the eager arm's own
total got significantly faster while the measured arm's own total did not get
significantly slower (one-sided p < ``alpha`` each way): a faster eager arm is not a
regression of the deferred one (issue 42). The price: a run on a host faster as a whole
whose arm got slower, yet no slower than its baseline, looks the same (the ratio cannot
tell the two apart) and is not caught by the ratio.

A baseline rule skipped for want of a baseline says what was searched and what came
closest; a baseline whose host was busy (its own host-load warning) is named in the reason,
and the gate's verdict counts it (``report.gate_verdict``).

The baseline search stays inside the folder given (links are not followed, special files
are skipped, the walk is bounded: ``report.model.find_report_files``); the gated report
itself is never its own baseline, and a baseline of another device or setup is never used
(``ci.comparable``). A baseline that was asked for (``--baseline``) but is missing,
unreadable, the report itself, of another kind or matching nothing raises
``BaselineError`` (the CLI's exit 2), and with it a baseline rule can never be skipped.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kimi_bench.ci.comparable import EAGER_BASELINE, Difference, comparable, describe
from kimi_bench.ci.evidence import Derived
from kimi_bench.ci.metrics import (
    GATED_KINDS,
    KIND_TABLE,
    eager_time_metric,
    higher_is_better,
    metric_samples,
    own_time_metric,
)
from kimi_bench.ci.rules import BaselineRules
from kimi_bench.ci.verdicts import FAIL, PASS, SKIP, RuleResult
from kimi_bench.infra.stats import median
from kimi_bench.infra.stats.rank_test import mann_whitney
from kimi_bench.report.files import report_file, report_in
from kimi_bench.report.gate_verdict import BUSY_BASELINE, NO_BASELINE
from kimi_bench.report.model import Report, ReportError, find_report_files, load_report


class BaselineError(ReportError):
    """A baseline that was asked for but cannot be used."""


def mann_whitney_greater(new: list[float], base: list[float]) -> float:
    """One-sided p-value that ``new`` tends to be larger than ``base``."""
    return mann_whitney(new, base, alternative="greater").p_value


def _moved(new: Derived, base: Derived, metric: str | None, alpha: float) -> tuple[int, str]:
    """Did ``metric`` (a time) move between the runs? +1 significantly slower, -1
    significantly faster (one-sided Mann-Whitney p < alpha, median that way), 0 neither;
    with the words."""
    if metric is None:
        return 0, ""
    try:
        xs, bs = metric_samples(new, metric), metric_samples(base, metric)
    except KeyError:
        return 0, ""
    if not xs or not bs:
        return 0, ""
    m_new, m_base = median(xs), median(bs)
    slower = mann_whitney(xs, bs, "greater").p_value
    faster = mann_whitney(bs, xs, "greater").p_value
    way = 1 if m_new > m_base and slower < alpha else -1 if m_new < m_base and faster < alpha else 0
    arm = metric.split(".")[1]
    p = slower if m_new > m_base else faster
    return way, f"the {arm} arm's own total {m_base:.4g} -> {m_new:.4g} ms (p = {p:.3g})"


def _eager_moved(metric: str, new: Derived, base: Derived, alpha: float) -> str | None:
    """For a metric that moves with the eager arm too (``metrics.own_time_metric``): why its
    regression is the eager arm's, not the measured arm's (the eager arm got significantly
    faster and the arm itself did not get significantly slower), or None."""
    own = own_time_metric(new.report, metric)
    if own is None:
        return None
    eager, eager_why = _moved(new, base, eager_time_metric(new.report), alpha)
    arm, arm_why = _moved(new, base, own, alpha)
    if eager < 0 and arm <= 0:
        return (
            f"; but {eager_why} got faster and {arm_why} did not get slower: the eager arm "
            f"moved, not a {own.split('.')[1]} regression"
        )
    return None


def _notes(base: Report, diffs: list[Difference]) -> str:
    """What the verdict must carry about the baseline: its own host-load warning, and a
    hard difference the caller allowed (another eager arm)."""
    out = ""
    load = base.header.environment.host_load
    warning = load.warning if load else None
    if warning:
        out += f"; {BUSY_BASELINE}: {warning}"
    for d in diffs:
        if d.what == EAGER_BASELINE and not d.hard:
            out += (
                f"; {d.what} differs: this run {d.a!r}, the baseline {d.b!r} (allowed by "
                "--allow-eager-baseline-mismatch)"
            )
    return out


def _compare(
    metric: str, new: Derived, base: Derived, rules: BaselineRules, notes: str = ""
) -> RuleResult:
    threshold = rules.threshold(metric, new.config.transport)
    source = base.report.source
    name, alpha = f"baseline.{metric}", rules.alpha
    xs = metric_samples(new, metric)
    try:
        bs = metric_samples(base, metric)
    except KeyError:
        return RuleResult(name, None, threshold, FAIL, f"baseline {source} has no {metric}")
    if not xs or not bs:
        which = "this report" if not xs else f"baseline {source}"
        return RuleResult(name, None, threshold, FAIL, f"no samples of {metric} in {which}")
    m_new, m_base = median(xs), median(bs)
    change = (m_new - m_base) / m_base if m_base else math.nan
    up = higher_is_better(metric)
    worse = -change if up else change
    # "new is worse": larger for lower-is-better metrics, smaller for higher-is-better ones
    test = mann_whitney(bs, xs, "greater") if up else mann_whitney(xs, bs, "greater")
    fail = worse > threshold and test.p_value < alpha
    eager_moved = _eager_moved(metric, new, base, alpha) if fail else None
    fail = fail and eager_moved is None
    unless = (
        " (unless the eager arm got faster while the arm itself did not get slower)"
        if own_time_metric(new.report, metric)
        else ""
    )
    why = (
        f"median {m_base:.4g} -> {m_new:.4g} ({change:+.1%}); Mann-Whitney one-sided "
        f"p = {test.p_value:.3g} ({test.method}); fails if worse by > {threshold:.1%} and "
        f"p < {alpha}{unless}{eager_moved or ''}; baseline {source}{notes}"
    )
    return RuleResult(name, change, threshold, FAIL if fail else PASS, why)


def relative_rules(
    new: Derived,
    base: Derived | None,
    rules: BaselineRules,
    *,
    required: bool = False,
    none_why: str = NO_BASELINE,
    notes: str = "",
) -> list[RuleResult]:
    """The baseline rules of ``new``'s kind; ``none_why``: why there is no baseline (the
    reason of each rule skipped for want of one), ``notes``: what to say about the
    baseline (``_notes``)."""
    out = []
    prefix = KIND_TABLE[new.report.kind] + "."
    for metric in (m for m in rules.metrics if m.startswith(prefix)):
        name = f"baseline.{metric}"
        try:
            metric_samples(new, metric)
        except KeyError:
            why = f"this report has no metric {metric}"
            out.append(RuleResult(name, None, rules.threshold(metric), FAIL, why))
            continue
        if base is None:
            verdict = FAIL if required else SKIP
            out.append(RuleResult(name, None, rules.threshold(metric), verdict, none_why))
            continue
        out.append(_compare(metric, new, base, rules, notes))
    return out


def is_self(report: Report, path: Path) -> bool:
    if report.source is None:
        return False
    try:
        return os.path.samefile(report.source, path)
    except OSError:
        return False


@lru_cache(maxsize=256)
def _load_version(path: str, mtime_ns: int, size: int) -> Derived:
    """One version of a candidate file, read (and checked) once per process, its figures
    derived at most once (a gate over a folder of reports searches the same folder for
    every report it gates)."""
    del mtime_ns, size  # the cache key: an edited file is read again
    return Derived(load_report(path, kinds=GATED_KINDS))


def _load_candidate(path: Path) -> Derived:
    try:
        st = path.stat()
    except OSError:
        return Derived(load_report(path, kinds=GATED_KINDS))  # names the problem
    return _load_version(str(path), st.st_mtime_ns, st.st_size)


def _candidates(report: Report, where: Path, required: bool) -> list[Path]:
    if where.is_dir() and report_in(where) is None:
        found = find_report_files(where)
        if required and not found:
            raise BaselineError(f"baseline {where} holds no report.json")
        return found
    path = report_file(where)
    if is_self(report, path):
        raise BaselineError(f"baseline {where} is the gated report itself; give the reference run")
    return [path]


@dataclass(frozen=True)
class Allow:
    """What the caller accepts: no baseline found (``--allow-no-baseline``: the gate passes
    saying no regression check was made) and a baseline made with the other eager arm
    (``--allow-eager-baseline-mismatch``: used, and named)."""

    no_baseline: bool = False
    eager_baseline_mismatch: bool = False

    @property
    def differences(self) -> frozenset[str]:
        return frozenset({EAGER_BASELINE}) if self.eager_baseline_mismatch else frozenset()


@dataclass(frozen=True)
class Found:
    """A baseline search's answer: the report (None: none found), why none was found (the
    reason of each skipped rule) and what the verdict must say about the one found."""

    derived: Derived | None
    why: str = NO_BASELINE
    notes: str = ""

    @property
    def report(self) -> Report | None:
        return None if self.derived is None else self.derived.report


def find_baseline(
    report: Report,
    where: Path | None,
    *,
    required: bool = True,
    allow: frozenset[str] = frozenset(),
) -> Report | None:
    """The baseline report of the same kind and setup (``search_baseline``), or None."""
    return search_baseline(report, where, required=required, allow=allow).report


def search_baseline(
    report: Report,
    where: Path | None,
    *,
    required: bool = True,
    allow: frozenset[str] = frozenset(),
) -> Found:
    """The baseline report of the same kind and setup: a file, or searched in a folder.

    ``required`` (``--baseline`` was given): a missing path, an unreadable report, the
    gated report itself, another kind, or nothing of the same setup raise BaselineError
    naming what differs; otherwise (the default folder per device) they mean no baseline,
    and ``Found.why`` says what was searched and what came closest. ``allow``: hard
    differences accepted (``comparable``)."""
    if where is None:
        return Found(None, f"{NO_BASELINE}: none given (--baseline)")
    if not where.exists():
        if required:
            raise BaselineError(f"baseline {where} does not exist")
        return Found(None, f"{NO_BASELINE}: {where} does not exist")
    closest: list[tuple[int, str]] = []  # (hard differences, what): the closest first
    for c in _candidates(report, where, required):
        if is_self(report, c):
            continue
        try:
            found = _load_candidate(c)
        except ReportError as exc:
            raise BaselineError(f"unusable baseline: {exc}") from None
        base = found.report
        if base.kind != report.kind:
            closest.append((1 << 30, f"{c}: a {base.kind} report"))
            continue
        ok, diffs = comparable(report, base, allow)
        if ok:
            return Found(found, notes=_notes(base, diffs))
        hard = [d for d in diffs if d.hard]
        closest.append((len(hard), f"{c}: not comparable ({describe(hard)})"))
    detail = "; ".join(w for _, w in sorted(closest, key=lambda x: x[0])[:3]) or "no other report"
    if required:
        raise BaselineError(
            f"baseline {where} has no {report.kind} report of this setup ({detail})"
        )
    return Found(
        None, f"{NO_BASELINE}: {where} holds no {report.kind} report of this setup ({detail})"
    )
