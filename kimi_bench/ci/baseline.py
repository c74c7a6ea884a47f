"""Relative gate rules: find the baseline report of the same setup and compare named
metrics (``ci.metrics``) against it.

A relative rule fails only when the new median is worse than the baseline's by more than
``max_regression`` AND a one-sided Mann-Whitney U test on the raw samples says the shift
is beyond noise (p < ``alpha``).

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
from functools import lru_cache
from pathlib import Path

from kimi_bench.ci.comparable import comparable, describe
from kimi_bench.ci.metrics import GATED_KINDS, KIND_TABLE, higher_is_better, metric_samples
from kimi_bench.ci.rules import BaselineRules
from kimi_bench.ci.verdicts import FAIL, PASS, SKIP, RuleResult
from kimi_bench.infra.stats import median
from kimi_bench.infra.stats.rank_test import mann_whitney
from kimi_bench.report.files import report_file, report_in
from kimi_bench.report.model import Report, ReportError, find_report_files, load_report


class BaselineError(ReportError):
    """A baseline that was asked for but cannot be used."""


def mann_whitney_greater(new: list[float], base: list[float]) -> float:
    """One-sided p-value that ``new`` tends to be larger than ``base``."""
    return mann_whitney(new, base, alternative="greater").p_value


def _compare(metric: str, new: Report, base: Report, rules: BaselineRules) -> RuleResult:
    carrier = new.config.get("transport")
    threshold = rules.threshold(metric, carrier if isinstance(carrier, str) else None)
    name, alpha = f"baseline.{metric}", rules.alpha
    xs = metric_samples(new, metric)
    try:
        bs = metric_samples(base, metric)
    except KeyError:
        return RuleResult(name, None, threshold, FAIL, f"baseline {base.source} has no {metric}")
    if not xs or not bs:
        which = "this report" if not xs else f"baseline {base.source}"
        return RuleResult(name, None, threshold, FAIL, f"no samples of {metric} in {which}")
    m_new, m_base = median(xs), median(bs)
    change = (m_new - m_base) / m_base if m_base else math.nan
    up = higher_is_better(metric)
    worse = -change if up else change
    # "new is worse": larger for lower-is-better metrics, smaller for higher-is-better ones
    test = mann_whitney(bs, xs, "greater") if up else mann_whitney(xs, bs, "greater")
    fail = worse > threshold and test.p_value < alpha
    why = (
        f"median {m_base:.4g} -> {m_new:.4g} ({change:+.1%}); Mann-Whitney one-sided "
        f"p = {test.p_value:.3g} ({test.method}); fails if worse by > {threshold:.1%} and "
        f"p < {alpha}; baseline {base.source}"
    )
    return RuleResult(name, change, threshold, FAIL if fail else PASS, why)


def relative_rules(
    new: Report, base: Report | None, rules: BaselineRules, *, required: bool = False
) -> list[RuleResult]:
    out = []
    prefix = KIND_TABLE[new.kind] + "."
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
            out.append(RuleResult(name, None, rules.threshold(metric), verdict, "no baseline"))
            continue
        out.append(_compare(metric, new, base, rules))
    return out


def is_self(report: Report, path: Path) -> bool:
    if report.source is None:
        return False
    try:
        return os.path.samefile(report.source, path)
    except OSError:
        return False


@lru_cache(maxsize=256)
def _load_version(path: str, mtime_ns: int, size: int) -> Report:
    """One version of a candidate file, read once per process (a gate over a folder of
    reports searches the same folder for every report it gates)."""
    del mtime_ns, size  # the cache key: an edited file is read again
    return load_report(path, kinds=GATED_KINDS)


def _load_candidate(path: Path) -> Report:
    try:
        st = path.stat()
    except OSError:
        return load_report(path, kinds=GATED_KINDS)  # names the problem
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


def find_baseline(report: Report, where: Path | None, *, required: bool = True) -> Report | None:
    """The baseline report of the same kind and setup: a file, or searched in a folder.

    ``required`` (``--baseline`` was given): a missing path, an unreadable report, the
    gated report itself, another kind, or nothing of the same setup raise BaselineError
    naming what differs; otherwise (the default folder per device) they mean no baseline."""
    if where is None:
        return None
    if not where.exists():
        if required:
            raise BaselineError(f"baseline {where} does not exist")
        return None
    closest: list[str] = []
    for c in _candidates(report, where, required):
        if is_self(report, c):
            continue
        try:
            base = _load_candidate(c)
        except ReportError as exc:
            raise BaselineError(f"unusable baseline: {exc}") from None
        if base.kind != report.kind:
            closest.append(f"{c}: a {base.kind} report")
            continue
        ok, diffs = comparable(report, base)
        if ok:
            return base
        closest.append(f"{c}: not comparable ({describe([d for d in diffs if d.hard])})")
    if required:
        detail = "; ".join(closest[:3]) or "no other report"
        raise BaselineError(
            f"baseline {where} has no {report.kind} report of this setup ({detail})"
        )
    return None
