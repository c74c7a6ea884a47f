"""A peer tool's summary statistics recomputed from its per-request rows by the tool's own
method (``peers.figures`` says which tool uses which): numpy's mean, median and linear
percentile (``numpy_stat``) and GuideLLM's weighted distribution (``guidellm_stat``); and
the summary an imported file's rows give, to hold its stated one against (``rows_summary``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kimi_bench.infra.stats import Measurement, percentile


def numpy_stat(xs: Sequence[float], stat: str) -> float | None:
    """np.mean / np.median / np.percentile (linear) as sglang, vLLM and AIPerf use them."""
    if not xs:
        return None
    arr = np.asarray(xs, dtype=np.float64)
    if stat == "mean":
        return float(np.mean(arr))
    q = 50.0 if stat == "median" else float(stat[1:])
    return float(np.percentile(arr, q))


def guidellm_stat(values: Sequence[float], weights: Sequence[float], stat: str) -> float | None:
    """GuideLLM 0.8.1's DistributionSummary.from_values: duplicate values merged, zero
    weights dropped, probabilities normalised; the percentile is the first value whose
    cumulative probability reaches q; the mean is weighted."""
    if not values:
        return None
    vals, inv = np.unique(np.asarray(values, dtype=np.float64), return_inverse=True)
    w = np.zeros_like(vals)
    np.add.at(w, inv, np.asarray(weights, dtype=np.float64))
    keep = w > 0
    vals, w = vals[keep], w[keep]
    if len(vals) == 0:
        return None
    p = w / np.sum(w)
    if stat == "mean":
        return float(np.sum(vals * p))
    q = 0.5 if stat == "median" else float(stat[1:]) / 100
    idx = int(np.searchsorted(np.cumsum(p), q, side="left"))
    return float(vals[min(idx, len(vals) - 1)])


def rows_summary(xs: Sequence[float]) -> dict[str, float]:
    """The mean, median and p99 of an imported file's per-request samples (numpy's linear
    percentile, as the tools compute them)."""
    return {"mean": Measurement(list(xs)).mean, "median": percentile(xs, 50),
            "p99": percentile(xs, 99)}  # fmt: skip
