"""``compare``: two reports of the same kind side by side. Where raw samples exist (micro
stages and totals, serve-ab TTFTs) each row is ``kimi_bench.infra.stats.compare.compare`` of
B versus A: medians, the signed delta in percent, its bootstrap interval, the verdict
(significant only with enough independent samples and an interval that excludes zero) and a
two-sided Mann-Whitney p-value. serve-ab TTFTs count the requests of one forward batch as
one independent unit, as the serve-ab report itself does."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from pydantic import BaseModel

from kimi_bench.ci.comparable import Difference, comparable
from kimi_bench.ci.evidence import Derived
from kimi_bench.ci.evidence_rows import evidence
from kimi_bench.infra.stats import Measurement, median, percentile
from kimi_bench.infra.stats.compare import SIGNIFICANT, STRADDLES_ZERO, Comparison, compare
from kimi_bench.report.envelope import Loose
from kimi_bench.report.kinds import MicroReport, ParityReport, ParityRow
from kimi_bench.report.model import Report, ReportError
from kimi_bench.results.base import typed_records
from kimi_bench.results.serve_rows import RateRow

Units = list[Hashable] | None
Cell = str | float | bool | None
Row = dict[str, Cell]  # one row of the comparison table, column -> cell


ALPHA = 0.05  # the rank test's level, as the gate's baseline rules use it


def answer(c: Comparison) -> str:
    """The comparison's one statistical answer: the verdict of the percentile's bootstrap
    interval (what the delta is about). The two-sided Mann-Whitney test beside it asks a
    different question (do one side's values tend to be larger?); where the two disagree
    the verdict says so and which one decides, so one line never gives two answers."""
    if c.verdict not in (SIGNIFICANT, STRADDLES_ZERO):
        return c.verdict
    p = c.test.p_value
    what = "median" if c.q == 50 else f"p{c.q:g}"
    if not c.significant and p < ALPHA:
        return (
            f"not significant ({c.verdict}); the rank test's p = {p:.3g} < {ALPHA} says one "
            f"side's values tend to be larger, not that the {what} moved: the {what}'s "
            "interval decides"
        )
    if c.significant and p >= ALPHA:
        return (
            f"{SIGNIFICANT} (the {what}'s interval excludes zero); the rank test's p = "
            f"{p:.3g} >= {ALPHA} sees no shift of the whole distribution"
        )
    return c.verdict


def _stats(xa: list[float], xb: list[float], ua: Units = None, ub: Units = None) -> Row:
    """delta_pct / ci95 / verdict / p_value of B vs A (None where a side has no samples);
    ``ua``/``ub``: the independent unit of each sample (None: every sample is one)."""
    if not xa or not xb:
        which = "A" if not xa else "B"
        return {
            "delta_pct": None,
            "ci95": None,
            "verdict": f"no samples in {which}",
            "p_value": None,
        }
    c = compare(Measurement(xa, "ms", "A", ua), Measurement(xb, "ms", "B", ub))
    return {
        "delta_pct": c.delta_pct,
        "ci95": c.interval.fmt(pct=True),
        "verdict": answer(c),
        "p_value": c.test.p_value,
    }


def compare_reports(a: Report, b: Report) -> tuple[list[Row], list[Difference]]:
    """Rows of B vs A and what differs between the two runs. Both reports' raw data is
    checked first (EvidenceError when a summary disagrees with it). Across devices or
    setups (a hard difference) no row is called significant: its verdict says
    "not comparable" with the reason."""
    if a.kind != b.kind:
        raise ReportError(f"cannot compare a {a.kind!r} report with a {b.kind!r} report")
    by_kind = {"micro": _micro, "serve-ab": _serve, "parity": _parity}
    if a.kind not in by_kind:
        raise ReportError(f"compare does not handle {a.kind!r} reports")
    ea, eb = evidence(a), evidence(b)
    _not_one_file(a, b)
    rows = by_kind[a.kind](ea.derived, eb.derived)
    ok, diffs = comparable(a, b)
    if not ok:
        why = "not comparable: " + "; ".join(str(d) for d in diffs if d.hard)
        for row in rows:
            if "verdict" in row:
                row.update(verdict=why, p_value=None)
    return rows, diffs


class SourceFile(BaseModel):
    """One arm's result file of an imported report (``config.source.arms.<arm>``)."""

    sha256: Loose[str] = None
    file: Any = None


def _sources(rep: Report) -> dict[str, str]:
    """An imported report's result files by their sha256 (``config.source.arms``)."""
    cfg = rep.header.config
    arms = cfg.source.arms if cfg.imported and cfg.source else None
    files = [SourceFile.model_validate(s) for s in (arms or {}).values() if isinstance(s, dict)]
    return {f.sha256: str(f.file) for f in files if f.sha256}


def _not_one_file(a: Report, b: Report) -> None:
    """Two imports of one result file are one run: compared with itself its delta would be
    +0.0% by construction (``kimi-bench import`` refuses one file as two arms likewise)."""
    same = sorted(set(_sources(a)) & set(_sources(b)))
    if same:
        raise ReportError(
            f"A and B were imported from the same result file ({_sources(a)[same[0]]}, sha256 "
            f"{same[0][:12]}): one run compared with itself gives +0.0% by construction"
        )


def _micro(a: Derived, b: Derived) -> list[Row]:
    rows: list[Row] = []
    arms_a, arms_b = a.report.typed(MicroReport).arms, b.report.typed(MicroReport).arms
    for arm in [x for x in arms_a if x in arms_b]:
        sa, sb = arms_a[arm], arms_b[arm]
        pairs = [
            (s, st.samples_ms, sb.stages[s].samples_ms if s in sb.stages else [])
            for s, st in sa.stages.items()
        ]
        pairs.append(("TOTAL", sa.total_ms.samples, sb.total_ms.samples))
        for stage, xa, xb in pairs:
            if not xa and not xb:
                continue
            rows.append(
                {
                    "arm": arm,
                    "stage": stage,
                    "A_median_ms": median(xa) if xa else None,
                    "B_median_ms": median(xb) if xb else None,
                    **_stats(xa, xb),
                }
            )
    return rows


def _serve(a: Derived, b: Derived) -> list[Row]:
    def samples(d: Derived, rate: str, arm: str) -> tuple[list[float], Units]:
        """TTFTs and their units: requests served in one forward batch (``repeat``,
        ``batch_id``) are one unit when the report records batches."""
        served = d.serve.cell(rate, arm).served
        batched = all(r.batch_id is not None for r in served)
        units: Units = [(r.repeat, r.batch_id) for r in served] if batched else None
        return [r.ttft_ms for r in served if r.ttft_ms is not None], units

    rows: list[Row] = []
    thr_b = {(r.rate, r.arm): r.req_per_s for r in _rate_rows(b)}
    for r in _rate_rows(a):
        key = (r.rate, r.arm)
        (xa, ua), (xb, ub) = samples(a, *key), samples(b, *key)
        rows.append(
            {
                "rate": key[0],
                "arm": key[1],
                "A_ttft_median_ms": median(xa) if xa else None,
                "B_ttft_median_ms": median(xb) if xb else None,
                **_stats(xa, xb, ua, ub),
                "A_p90_ms": percentile(xa, 90) if xa else None,
                "B_p90_ms": percentile(xb, 90) if xb else None,
                "A_req_per_s": r.req_per_s,
                "B_req_per_s": thr_b.get(key),
            }
        )
    return rows


def _rate_rows(d: Derived) -> list[RateRow]:
    """Every per-rate row, in order (checked by the evidence: they read)."""
    return typed_records(d.report.results, RateRow, "results")


def _parity(a: Derived, b: Derived) -> list[Row]:
    rb = {r.name: r for r in b.report.typed(ParityReport).results}
    rows: list[Row] = []
    for r in a.report.typed(ParityReport).results:
        # an image B lacks compares with nothing: every flag None
        other = rb.get(r.name) or ParityRow(name=r.name)
        same = (r.bit_exact_fp32, r.bit_exact_bf16) == (other.bit_exact_fp32, other.bit_exact_bf16)
        rows.append(
            {
                "name": r.name,
                "A_bit_exact": r.bit_exact_fp32,
                "B_bit_exact": other.bit_exact_fp32,
                "A_deferred": r.deferred,
                "B_deferred": other.deferred,
                "changed": not same,
            }
        )
    return rows
