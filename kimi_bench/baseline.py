"""Relative gate rules: find the baseline report of the same setup and compare named
metrics against it.

Metrics (checked when the rules are loaded, so a typo is an error, never a silent skip):
    micro.speedup | micro.<arm>.total_ms | micro.<arm>.<stage>_ms |
    serve_ab.<rate>.<arm>.ttft_ms

A relative rule fails only when the new median is worse than the baseline's by more than
``max_regression`` AND a one-sided Mann-Whitney U test on the raw samples says the shift
is beyond noise (p < ``alpha``; ``kimi_bench.stats.mann_whitney``: exact without ties for
small samples, else the normal approximation with tie correction).

The baseline search stays inside the folder given (links are not followed, special files
are skipped, the walk is bounded: ``report.model.find_report_files``); the gated report
itself is never its own baseline. A baseline that was asked for but is missing or
unreadable raises ``BaselineError`` (the CLI's exit 2).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_bench.pipeline import ARMS, STAGES
from kimi_bench.report.model import Report, ReportError, find_report_files, load_report
from kimi_bench.stats import mann_whitney, median

GATED_KINDS = ("parity", "micro", "serve-ab")
KIND_TABLE = {"parity": "parity", "micro": "micro", "serve-ab": "serve_ab"}
_METRIC = re.compile(
    r"^(micro\.speedup"
    r"|micro\.(?P<arm>[a-z][a-z0-9_-]*)\.(?P<stage>[a-z0-9_]+)_ms"
    r"|serve_ab\.(?P<rate>inf|[0-9]+(\.[0-9]+)?)\.(?P<sarm>[a-z][a-z0-9_-]*)\.ttft_ms)$"
)


class BaselineError(ReportError):
    """A baseline that was asked for but cannot be used (missing, unreadable, the gated
    report itself)."""


@dataclass
class RuleResult:
    rule: str
    measured: Any
    limit: Any
    verdict: str  # "pass", "fail" or "skip"
    reason: str
    report: str = ""  # which report the rule was applied to

    def as_dict(self) -> dict[str, Any]:
        return {
            "report": self.report,
            "rule": self.rule,
            "measured": self.measured,
            "limit": self.limit,
            "verdict": self.verdict,
            "reason": self.reason,
        }


def metric_problem(metric: Any) -> str | None:
    """Why a metric name cannot be gated, or None when it is known."""
    if not isinstance(metric, str):
        return f"metric names are strings, got {metric!r}"
    m = _METRIC.match(metric)
    if m is None:
        return (
            f"unknown metric {metric!r}; expected micro.speedup, micro.<arm>.total_ms, "
            "micro.<arm>.<stage>_ms or serve_ab.<rate>.<arm>.ttft_ms"
        )
    arms, stages = ARMS, STAGES
    arm = m.group("arm") or m.group("sarm")
    if arm is not None and arm not in arms:
        return f"unknown arm {arm!r} in metric {metric!r}; arms: {', '.join(arms)}"
    stage = m.group("stage")
    if stage is not None and stage != "total" and stage not in stages:
        return f"unknown stage {stage!r} in metric {metric!r}; stages: total, {', '.join(stages)}"
    return None


def metric_samples(report: Report, metric: str) -> tuple[list[float], bool]:
    """Raw samples for a named metric and whether higher is better (KeyError when the
    report does not hold it)."""
    parts = metric.split(".")
    if parts[0] == "micro" and report.kind == "micro":
        if parts[1:] == ["speedup"]:
            return list(report.data.get("speedup", {})["samples"]), True
        if len(parts) == 3:
            arm = report.data["arms"][parts[1]]
            if parts[2] == "total_ms":
                return list(arm["total_ms"]["samples"]), False
            return list(arm["stages"][parts[2].removesuffix("_ms")]["samples_ms"]), False
    if parts[0] == "serve_ab" and report.kind == "serve-ab" and len(parts) == 4:
        rate, arm = parts[1], parts[2]
        xs = [
            r["ttft_ms"]
            for r in report.data["requests"]
            if r["rate"] == rate and r["arm"] == arm and r.get("ttft_ms") is not None
        ]
        return xs, False
    raise KeyError(metric)


def mann_whitney_greater(new: list[float], base: list[float]) -> float:
    """One-sided p-value that ``new`` tends to be larger than ``base``."""
    return mann_whitney(new, base, alternative="greater").p_value


def _compare(metric: str, new: Report, base: Report, threshold: float, alpha: float) -> RuleResult:
    name = f"baseline.{metric}"
    xs, higher_better = metric_samples(new, metric)
    try:
        bs, _ = metric_samples(base, metric)
    except KeyError:
        return RuleResult(name, None, threshold, "fail", f"baseline {base.source} has no {metric}")
    if not xs or not bs:
        which = "this report" if not xs else f"baseline {base.source}"
        return RuleResult(name, None, threshold, "fail", f"no samples of {metric} in {which}")
    m_new, m_base = median(xs), median(bs)
    change = (m_new - m_base) / m_base if m_base else math.nan
    worse = -change if higher_better else change
    # "new is worse": larger for lower-is-better metrics, smaller for higher-is-better ones
    test = mann_whitney(bs, xs, "greater") if higher_better else mann_whitney(xs, bs, "greater")
    p = test.p_value
    fail = worse > threshold and p < alpha
    why = (
        f"median {m_base:.4g} -> {m_new:.4g} ({change:+.1%}); "
        f"Mann-Whitney one-sided p = {p:.3g} ({test.method}); fails if worse by "
        f"> {threshold:.0%} and p < {alpha}"
    )
    return RuleResult(name, change, threshold, "fail" if fail else "pass", why)


def relative_rules(new: Report, base: Report | None, rules: dict[str, Any]) -> list[RuleResult]:
    threshold = float(rules.get("max_regression", 0.10))
    alpha = float(rules.get("alpha", 0.05))
    out = []
    prefix = KIND_TABLE[new.kind]
    for metric in rules.get("metrics", []):
        if not str(metric).startswith(prefix + "."):
            continue
        name = f"baseline.{metric}"
        try:
            metric_samples(new, metric)
        except KeyError:
            out.append(
                RuleResult(name, None, threshold, "fail", f"this report has no metric {metric}")
            )
            continue
        if base is None:
            out.append(RuleResult(name, None, threshold, "skip", "no matching baseline report"))
            continue
        out.append(_compare(metric, new, base, threshold, alpha))
    return out


def same_setup(a: Report, b: Report) -> bool:
    keys = {
        "micro": ("groups", "ranks", "transport", "runtime"),
        "serve-ab": ("rates", "ranks", "resolution", "transport", "runtime"),
        "parity": (),
    }.get(a.kind)
    return (
        keys is not None
        and a.kind == b.kind
        and all(a.config.get(k) == b.config.get(k) for k in keys)
    )


def _is_self(report: Report, path: Path) -> bool:
    if report.source is None:
        return False
    try:
        return os.path.samefile(report.source, path)
    except OSError:
        return False


def find_baseline(report: Report, where: Path | None, *, required: bool = True) -> Report | None:
    """The baseline report of the same kind and setup: a file, or searched in a folder.

    ``required``: ``where`` was asked for (``--baseline``, a scenario's ``baseline``), so a
    missing path, an unreadable report or the gated report itself raise BaselineError;
    otherwise (the default folder per device) a missing folder means no baseline."""
    if where is None:
        return None
    if not where.exists():
        if required:
            raise BaselineError(f"baseline {where} does not exist")
        return None
    if where.is_dir() and not (where / "report.json").is_file():
        candidates = find_report_files(where)
    else:
        candidates = [where / "report.json" if where.is_dir() else where]
        if _is_self(report, candidates[0]):
            raise BaselineError(
                f"baseline {where} is the gated report itself; give the reference run"
            )
    for c in candidates:
        if _is_self(report, c):
            continue
        try:
            base = load_report(c, kinds=GATED_KINDS)
        except ReportError as exc:
            raise BaselineError(f"unusable baseline: {exc}") from None
        if same_setup(report, base):
            return base
    return None
