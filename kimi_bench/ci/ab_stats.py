"""The paired statistic of the revision A/B: one figure per process launch of each
revision, launches paired in the order they ran (A B, B A, A B, ...), and the regression
of the candidate against the base with a confidence interval over those pairs.

Each pair gives the log ratio of the candidate's figure to the base's, signed so that a
positive value is the candidate doing worse (a longer time, a smaller speedup). The
interval is the paired t interval of the mean log ratio (``scipy.stats.ttest_1samp`` on
the pairs' log ratios: a paired t-test), moved back to a relative change. The unit is the
launch pair, so the spread between launches (most of the noise on a shared host) is in the
interval; a launch's figure summarizes its own repeats (``ab.arm_figure``: the fastest one by
default).

A metric is a regression when its estimate exceeds the allowed regression AND the interval
excludes no change (as ``asv continuous``: a change must be large and significant). The
speedup over eager is one only while the deferred arm is itself significantly slower
(``deferred_bound``): on a CPU host the eager arm's time has outlier launches of its own
(12-14 ms against 8-9 ms), and a slow eager launch in the base made two of six A/A runs
fail on the speedup alone (reports/calibration/cpu-revision-ab). An
estimate over the threshold whose interval still reaches zero is inconclusive (more
launches would decide it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

METHOD = "paired t interval over launch pairs (scipy.stats.ttest_1samp on log ratios)"

Verdict = Literal["regression", "inconclusive", "improvement", "ok", "eager moved"]


class PairedChange(BaseModel):
    """One metric's change, candidate vs base (``+0.2``: 20% worse); as the A/B's
    report.json holds it, with its method and sentence."""

    model_config = ConfigDict(frozen=True)

    metric: str
    better: Literal["lower", "higher"]
    n_pairs: int
    estimate: float  # exp(mean log ratio) - 1, signed: > 0 is worse
    low: float
    high: float
    p_value: float | None
    confidence: float
    threshold: float
    verdict: Verdict
    pair_changes: tuple[float, ...]  # each pair's change, same sign convention
    method: str = METHOD

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sentence(self) -> str:
        """One line: the metric, its change with the interval and what it means."""
        ci = f"{self.confidence:.0%} CI {self.low:+.1%} .. {self.high:+.1%}"
        worse = "longer" if self.better == "lower" else "smaller"
        what = {
            "regression": f"REGRESSION (candidate {self.estimate:+.1%} {worse}, over the "
            f"allowed {self.threshold:.0%}, and the interval excludes no change)",
            "inconclusive": f"inconclusive (over the allowed {self.threshold:.0%}, but the "
            "interval reaches no change: add launches)",
            "improvement": "improvement (the candidate is better beyond the threshold)",
            "ok": f"within the allowed {self.threshold:.0%}",
            "eager moved": f"over the allowed {self.threshold:.0%}, but the deferred arm did "
            "not get significantly slower: the eager arm moved, not a deferred regression",
        }[self.verdict]
        return f"{self.metric}: {self.estimate:+.1%} ({ci}, {self.n_pairs} launch pairs): {what}"


def paired_change(
    metric: str,
    base: Sequence[float],
    candidate: Sequence[float],
    *,
    better: Literal["lower", "higher"],
    threshold: float,
    confidence: float = 0.95,
) -> PairedChange:
    """The candidate's change against the base over launch pairs ``(base[i], candidate[i])``.
    ValueError with fewer than 2 pairs, unequal lengths or a figure that is not > 0."""
    from scipy.stats import ttest_1samp

    if len(base) != len(candidate):
        raise ValueError(f"{metric}: {len(base)} base launches vs {len(candidate)} candidate")
    if len(base) < 2:
        raise ValueError(f"{metric}: a paired interval needs at least 2 launch pairs")
    if not all(v > 0 and math.isfinite(v) for v in (*base, *candidate)):
        raise ValueError(f"{metric}: every launch's figure must be finite and > 0")
    sign = 1.0 if better == "lower" else -1.0
    logs = [sign * (math.log(c) - math.log(b)) for b, c in zip(base, candidate, strict=True)]
    mean = math.fsum(logs) / len(logs)
    if max(logs) - min(logs) <= 1e-12 * max(1.0, abs(mean)):  # no spread: a point
        lo, hi, p = mean, mean, None
    else:
        res = ttest_1samp(logs, 0.0)
        ci = res.confidence_interval(confidence_level=confidence)
        lo, hi, p = float(ci.low), float(ci.high), float(res.pvalue)
    est = math.expm1(mean)
    verdict: Verdict = "ok"
    if est > threshold:
        verdict = "regression" if lo > 0 else "inconclusive"
    elif est < -threshold and hi < 0:
        verdict = "improvement"
    return PairedChange(
        metric=metric,
        better=better,
        n_pairs=len(logs),
        estimate=est,
        low=math.expm1(lo),
        high=math.expm1(hi),
        p_value=p,
        confidence=confidence,
        threshold=threshold,
        verdict=verdict,
        pair_changes=tuple(math.expm1(v) for v in logs),
    )


def deferred_bound(speedup: PairedChange, deferred: PairedChange) -> PairedChange:
    """The speedup's verdict once the deferred arm's own change is known: a smaller speedup
    is a regression of the candidate only when its deferred arm is significantly slower
    (a regression needs the deferred interval above no change; an inconclusive one, a
    slower deferred estimate); otherwise the eager arm moved (in the base or the
    candidate), which is not a deferred regression ("eager moved")."""
    stands = {"regression": deferred.low > 0, "inconclusive": deferred.estimate > 0}
    if stands.get(speedup.verdict, True):
        return speedup
    return speedup.model_copy(update={"verdict": "eager moved"})


def launch_order(launches: int) -> list[tuple[int, str]]:
    """(pair, side) in run order for ``launches`` per revision: A B, B A, A B, ... so a
    drift on the host hits both sides alike."""
    order: list[tuple[int, str]] = []
    for i in range(launches):
        sides = ("base", "candidate") if i % 2 == 0 else ("candidate", "base")
        order += [(i, s) for s in sides]
    return order
