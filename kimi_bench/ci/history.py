"""Change points over a run history (``--append-jsonl`` files): did the newest runs start
a significant regression, and at which commit?

Detection is ``ruptures`` (PELT with an L2 cost; Killick et al. 2012), a maintained library
made for change-point detection that needs only numpy and scipy. (apache-otava pins numpy
2.2 and pulls database and chat clients; MongoDB's signal-processing-algorithms needs
numpy < 2 and Python 3.11 exactly: both would fight torch's environment.) The penalty is
BIC-like, ``PENALTY * sigma^2 * log(n)``, with sigma estimated robustly from the series'
first differences (a step does not inflate it).

A history fails when its last change point starts a segment that runs to the newest run,
holds at least ``min_size`` runs, is worse than everything before it by at least
``min_change`` (relative median), and a one-sided Mann-Whitney U test (scipy) of after
vs before gives p < ``alpha``. The first run of that segment names the first bad commit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kimi_bench.ci.metrics import higher_is_better
from kimi_bench.ci.verdicts import FAIL, PASS, SKIP, RuleResult
from kimi_bench.infra.jsonio import InputError, parse_json_lines
from kimi_bench.infra.limits import read_text_or
from kimi_bench.infra.stats import median
from kimi_bench.infra.stats.rank_test import mann_whitney

PENALTY = 4.0
MAX_HISTORY_BYTES = 64 * 1024 * 1024
DEFAULT_METRICS = {
    "micro": ("deferred_median_ms", "speedup_median"),
    "serve-ab": ("failed_requests",),
}


class HistoryError(ValueError):
    """A history file that cannot be read."""


@dataclass(frozen=True)
class Run:
    value: float
    commit: str
    created: str


@dataclass(frozen=True)
class HistoryLine:
    """One run of a history file, checked (``check_line``): its kind, commit, time and the
    values it measured of the series the gate reads (a value the run did not measure is
    absent)."""

    kind: str
    git: str | None
    created: str | None
    values: dict[str, float]


@dataclass(frozen=True)
class Finding:
    """The newest segment of a series, when the series has a change point."""

    start: int  # index of the first run after the change point
    before: float  # median before
    after: float  # median from ``start`` to the newest run
    change: float  # relative change of the median, after vs before
    p_value: float
    regression: bool


# What a history value may be: the series the gate reads are times (ms), speedups/ratios
# and request counts; a value beyond these bounds is a broken or edited line, not a run.
MAX_VALUE = {"deferred_median_ms": 1e9, "speedup_median": 1e6, "failed_requests": 1e9}
MAX_DEFAULT = 1e12


def _value_problem(key: str, v: Any) -> str | None:
    """Why the history value ``v`` of a gated series ``key`` is unusable (None: usable)."""
    if v is None:
        return None  # the run did not measure it (a partial run): not part of the series
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{key} must be a number or null, got {v!r} ({type(v).__name__})"
    if not math.isfinite(v):
        return f"{key} must be finite, got {v!r}"
    if key == "failed_requests" and not float(v).is_integer():
        return f"{key} must be a whole number, got {v!r}"
    limit = MAX_VALUE.get(key, MAX_DEFAULT)
    if not 0 <= v <= limit:
        return f"{key} is {v!r}: out of range (0 .. {limit:g})"
    return None


SERIES = sorted({m for names in DEFAULT_METRICS.values() for m in names})


def check_line(obj: dict[str, Any], where: str) -> HistoryLine:
    """A history line's kind, commit and the values of the series the gate reads, checked
    (HistoryError names ``where`` and the field)."""
    kind = obj.get("kind")
    if not isinstance(kind, str):
        raise HistoryError(f"{where}: kind must be a string (not a kimi-bench history line)")
    text: dict[str, str | None] = {}
    for key in ("git", "created"):
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise HistoryError(f"{where}: {key} must be a string, got {value!r}")
        text[key] = value
    values = {}
    for metric in SERIES:
        v = obj.get(metric)
        problem = _value_problem(metric, v)
        if problem:
            raise HistoryError(f"{where}: {problem}")
        if v is not None:
            values[metric] = float(v)
    return HistoryLine(kind, text["git"], text["created"], values)


def load_history(path: Path) -> list[HistoryLine]:
    """Every line of a JSONL history (HistoryError names the line and the field: not JSON,
    nested too deeply, not an object, or a gated value that is not a finite, bounded
    number of the right type)."""
    text = read_text_or(HistoryError, path, MAX_HISTORY_BYTES, "history file")
    try:
        lines = parse_json_lines(text, str(path))
    except InputError as exc:
        raise HistoryError(str(exc)) from None
    numbered = [i for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [check_line(obj, f"{path}:{n}") for n, obj in zip(numbered, lines, strict=True)]


def series(lines: Sequence[HistoryLine], kind: str, metric: str) -> list[Run]:
    """The values of ``metric`` in runs of ``kind``, in file order (oldest first)."""
    return [
        Run(line.values[metric], line.git or "?", line.created or "")
        for line in lines
        if line.kind == kind and metric in line.values
    ]


def _sigma(x: np.ndarray) -> float:
    """Noise scale from first differences (median absolute deviation), robust to steps."""
    d = np.diff(x)
    if d.size == 0:
        return 0.0
    mad = float(np.median(np.abs(d - np.median(d))))
    return 1.4826 * mad / math.sqrt(2.0)


def last_change(values: list[float], min_size: int = 3) -> int | None:
    """Index where the newest segment starts, or None (no change point)."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2 * min_size:
        return None
    scale = abs(float(np.median(x))) or 1.0
    x = x / scale
    sigma = _sigma(x)
    if sigma == 0.0:
        sigma = float(np.std(x)) or 1e-12
    import ruptures  # lazily: it imports scipy.stats (a second) that a gate without --history skips

    algo = ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(x.reshape(-1, 1))
    bkps = algo.predict(pen=PENALTY * sigma**2 * math.log(n))
    starts = [b for b in bkps if b < n]
    return starts[-1] if starts else None


def newest_segment(
    values: list[float], *, higher_better: bool, min_size: int = 3, alpha: float = 0.01
) -> Finding | None:
    start = last_change(values, min_size)
    if start is None or len(values) - start < min_size:
        return None
    before, after = values[:start], values[start:]
    m_b, m_a = median(before), median(after)
    change = (m_a - m_b) / abs(m_b) if m_b else math.inf
    worse = after if not higher_better else before
    better = before if not higher_better else after
    p = mann_whitney(worse, better, "greater").p_value
    regression = (change < 0) if higher_better else (change > 0)
    return Finding(start, m_b, m_a, change, p, regression)


def history_rules(
    lines: Sequence[HistoryLine],
    metrics: dict[str, tuple[str, ...]] | None = None,
    *,
    min_change: float = 0.05,
    alpha: float = 0.01,
    min_size: int = 3,
) -> list[RuleResult]:
    """One rule per (kind, metric) series in the history."""
    out = []
    for kind, names in (metrics or DEFAULT_METRICS).items():
        for metric in names:
            runs = series(lines, kind, metric)
            name = f"history.{kind}.{metric}"
            if len(runs) < 2 * min_size:  # gate_verdict.HISTORY_WAITING reads this reason
                why = (
                    f"{len(runs)} runs: {2 * min_size - len(runs)} more needed before a change "
                    f"point can be tested (at least {2 * min_size})"
                )
                out.append(RuleResult(name, len(runs), 2 * min_size, SKIP, why))
                continue
            values = [r.value for r in runs]
            f = newest_segment(
                values, higher_better=higher_is_better(metric), min_size=min_size, alpha=alpha
            )
            out.append(_verdict(name, runs, f, min_change, alpha))
    return out


def _verdict(
    name: str, runs: list[Run], f: Finding | None, min_change: float, alpha: float
) -> RuleResult:
    if f is None:
        return RuleResult(name, None, alpha, PASS, f"no change point in {len(runs)} runs")
    first = runs[f.start]
    what = (
        f"change point at run {f.start + 1} of {len(runs)} (commit {first.commit[:12]}): "
        f"median {f.before:.4g} -> {f.after:.4g} ({f.change:+.1%}), one-sided Mann-Whitney "
        f"p = {f.p_value:.3g}"
    )
    if f.regression and abs(f.change) >= min_change and f.p_value < alpha:
        return RuleResult(name, f.change, min_change, FAIL, f"regression from {what}")
    kind = "an improvement" if not f.regression else "not significant"
    return RuleResult(name, f.change, min_change, PASS, f"{kind}: {what}")
