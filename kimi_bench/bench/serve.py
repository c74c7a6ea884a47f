"""``serve-ab``: the same arrival trace through an eager and a deferred serving pipeline of
real processes, at each request rate; TTFT and throughput per arm, A/B deltas with
intervals."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kimi_bench.options import ServeOptions, rate_label

__all__ = ["ServeFailed", "arrival_offsets", "rate_label", "run_serve_ab"]


def arrival_offsets(
    rate: float, n: int, burstiness: float = 1.0, seed: int = 0
) -> tuple[float, ...]:
    """Seconds from the trace start for ``n`` requests.

    ``rate`` = inf sends everything at once; otherwise gaps are gamma distributed with
    shape ``burstiness`` and mean 1/rate (burstiness 1 = Poisson arrivals)."""
    if n < 0:
        raise ValueError("request count must be >= 0")
    if math.isinf(rate):
        return (0.0,) * n
    if rate <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    rng = np.random.default_rng([seed, int(rate * 1000)])
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    return tuple(float(x) for x in np.cumsum(gaps))


class ServeFailed(RuntimeError):
    def __init__(self, message: str, runs: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.runs = runs


def run_serve_ab(
    opts: ServeOptions,
    on_run: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (rate, repeat, arm) pipeline on this host; ``on_run`` sees the runs so far
    after each (for partial reports). Raises ServeFailed with the partial runs on a failure.
    Under torchrun use ``launch_runs.run_serve_on`` (the same loop)."""
    from kimi_bench.bench.launch import World
    from kimi_bench.bench.launch_runs import run_serve_on

    return run_serve_on(World(), opts, on_run)
