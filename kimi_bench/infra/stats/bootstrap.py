"""The seeded cluster bootstrap behind every confidence interval in ``stats``: resample
independent units (not samples) with replacement and take a percentile of each pooled
resample."""

from __future__ import annotations

import numpy as np


def cluster_bootstrap(
    groups: list[np.ndarray], q: float, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """The ``q`` percentile of each of ``resamples`` cluster-bootstrap resamples: draw
    ``len(groups)`` units with replacement and pool their samples."""
    k = len(groups)
    picks = rng.integers(0, k, size=(resamples, k))
    if all(len(g) == 1 for g in groups):
        return np.percentile(np.concatenate(groups)[picks], q, axis=1)
    # Without building the pooled resamples: a unit drawn c times weighs c on each of its
    # samples; with the samples sorted, the expanded position j is held by the first sample
    # whose cumulative weight exceeds j (numpy's linear rule on the pooled resample).
    counts = np.zeros((resamples, k), dtype=np.int64)
    np.add.at(counts, (np.arange(resamples)[:, None], picks), 1)
    xs = np.concatenate(groups)
    owner = np.repeat(np.arange(k), [len(g) for g in groups])
    order = np.argsort(xs, kind="stable")
    xs, owner = xs[order], owner[order]
    cum = np.cumsum(counts[:, owner], axis=1)
    pos = (cum[:, -1] - 1) * q / 100.0
    lo = np.floor(pos)
    hi = np.minimum(lo + 1, cum[:, -1] - 1)
    i_lo, i_hi = (cum <= lo[:, None]).sum(axis=1), (cum <= hi[:, None]).sum(axis=1)
    return xs[i_lo] + (xs[i_hi] - xs[i_lo]) * (pos - lo)
