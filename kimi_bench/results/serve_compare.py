"""serve-ab's A/B comparisons of one report: arm B against arm A on TTFT (median, p90,
over the same units: ``ArmCell.measurement``) and on throughput or goodput per repeat (B
minus A, %, with the interval of ``stats.compare``, seeded by the run's seed): the gate's
evidence (``throughput_comparison``, ``ttft_comparisons``) and the writer's A/B block
(``versus_figures``)."""

from __future__ import annotations

from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.compare import Comparison, ComparisonDoc, NoComparison, compare
from kimi_bench.results.serve import ArmCell
from kimi_bench.results.serve_rows import GOODPUT


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


def measured_median(xs: list[float]) -> float:
    """The median ``Measurement`` takes (the writer's stage medians)."""
    return Measurement(xs).median


def versus_figures(
    a: tuple[str, ArmCell, list[float]],
    b: tuple[str, ArmCell, list[float]],
    seed: int,
    goodput: bool,
) -> dict[str, ComparisonDoc | NoComparison]:
    """Arm B vs arm A, each (name, cell, finite throughput per repeat): median and p90 TTFT,
    median ITL/TPOT/E2E (when measured), all over the same units, throughput and (with
    SLOs) goodput over repeats. The measurements are made first, then compared in one pass."""
    (na, ca, ta), (nb, cb, tb) = a, b
    ma, mb = ca.measurement("ttft", na), cb.measurement("ttft", nb)
    # (key, A, B, percentile, whether a side may be empty: "no completed runs")
    todo: list[tuple[str, Measurement, Measurement, float, bool]] = [
        ("median_ttft", ma, mb, 50, False),
        ("p90_ttft", ma, mb, 90, False),
        ("throughput", Measurement(ta, "req/s"), Measurement(tb, "req/s"), 50.0, True),
    ]
    for metric in ("itl", "tpot", "e2e"):
        xa, xb = ca.measurement(metric, na), cb.measurement(metric, nb)
        if xa.n and xb.n:  # ITL and TPOT need two tokens a request; E2E a stream
            todo.append((f"median_{metric}", xa, xb, 50, False))
    if goodput:  # per repeat (``ArmCell.throughputs``)
        ga = Measurement(ca.throughputs.get(GOODPUT, []), "1/s")
        gb = Measurement(cb.throughputs.get(GOODPUT, []), "1/s")
        todo.append(("goodput", ga, gb, 50.0, True))
    return {
        # a side with no completed run (throughput, goodput): no comparison
        key: NoComparison(delta_pct=None, verdict="no completed runs", significant=False)
        if safe and not (x.n and y.n)
        else compare(x, y, q=q, seed=seed).as_dict()
        for key, x, y, q, safe in todo
    }
