"""serve-ab's A/B comparisons of one report: arm B against arm A on TTFT (median, p90,
over the same units: ``ArmCell.measurement``) and on throughput or goodput per repeat (B
minus A, %, with the interval of ``stats.compare``, seeded by the run's seed)."""

from __future__ import annotations

from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.compare import Comparison, compare


def throughput_comparison(a: list[float], b: list[float], seed: int) -> Comparison | None:
    """Throughput of arm B vs arm A (req/s per run), or None when a side has none."""
    if not a or not b:
        return None
    return compare(Measurement(a, "req/s"), Measurement(b, "req/s"), seed=seed)


def ttft_comparisons(a: Measurement, b: Measurement, seed: int) -> dict[str, Comparison | None]:
    """``median_ttft`` and ``p90_ttft`` of arm B vs arm A (None: a side has no unit)."""
    return {
        name: compare(a, b, q=q, seed=seed) if a.n and b.n else None
        for name, q in (("median_ttft", 50), ("p90_ttft", 90))
    }
