"""A serve-ab report's stated figures against what its request rows give (see ``agree``),
in one place: the rows are the report model's typed rows (``report.kinds.ServeRequest``,
a ``results.serve_rows.ServeRequest``) and every figure is ``derive_serve``'s. Each row's
TPOT against its own E2E, TTFT and output tokens; each per-rate row's completed requests,
latency statistics, throughputs and goodput; the A/B block's values and deltas; an
imported report's rows against the figures the peer tool itself wrote in the same file.
An edited figure is refused on read."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from kimi_bench.options.parse import parse_goodput
from kimi_bench.report.agree import Disagreement, agree, number
from kimi_bench.report.envelope import RunConfig
from kimi_bench.report.kinds import EarlierServeReport, ServeReport, ServeRow
from kimi_bench.report.roles import Config, baseline_arm, typed_config
from kimi_bench.results.peer_stats import rows_summary
from kimi_bench.results.serve import COMPARED, ServeDerived, ServeRaw, derive_serve
from kimi_bench.results.serve_rows import (
    LATENCIES,
    THROUGHPUTS,
    ServeRequest,
    samples,
    serve_requests,
)

# A peer tool's own summary against its rows: beyond this the file was edited (the tools
# compute their figures from the same per-request numbers; only rounding may differ).
TOOL_REL_TOL = 1e-3
TOOL_ABS_TOL_MS = 1e-3
_FIGURE_PREFIXES = tuple(f"{m}_" for m in LATENCIES)


def slos(config: Config) -> dict[str, float]:
    """The report's goodput SLOs (``config.goodput``), {} when none were given."""
    given = typed_config(config).goodput
    return parse_goodput(given) if given else {}


def serve_arms(config: Config, summary: Mapping[str, object]) -> list[str]:
    """The report's arms, in order (``summary.arms``, else ``config.arms``)."""
    stated = summary.get("arms")
    arms = stated if isinstance(stated, list) and stated else typed_config(config).arms
    return [str(a) for a in arms]


def derive_report(config: Config, summary: Mapping[str, object], rows: object) -> ServeDerived:
    """``derive_serve`` of a report's blocks (rows already checked by the report model)."""
    return _derive(typed_config(config), serve_arms(config, summary), serve_requests(rows))


def _derive(config: RunConfig, arms: Sequence[str], rows: Sequence[ServeRequest]) -> ServeDerived:
    """The rows' figures, each arm against the baseline arm (else the first)."""
    base = (baseline_arm(config, arms) or arms[0]) if arms else None
    return derive_serve(ServeRaw(tuple(rows), slos(config), tuple(arms), base))


def check_rows(rows: Sequence[ServeRequest]) -> None:
    """Each request row (typed by the report model): numbers where numbers belong (its
    other columns as written), unique by (rate, arm, repeat, rid), and its TPOT the one
    its own E2E, TTFT and output tokens give."""
    seen: dict[tuple[object, ...], int] = {}
    for i, row in enumerate(rows):
        at = f"requests[{i}]"
        for key, v in (row.model_extra or {}).items():  # times of any sign, bytes >= 0
            if v is not None and key.endswith(("_ms", "_bytes")):
                number(v, f"{at}.{key}", minimum=0.0 if key.endswith("_bytes") else None)
        if row.rid is None:
            continue
        ident = (row.rate, row.arm, row.repeat, row.rid)
        if ident in seen:
            raise Disagreement(
                f"{at} repeats requests[{seen[ident]}] (rate {ident[0]}, arm {ident[1]}, "
                f"repeat {ident[2]}, rid {ident[3]!r}): each request is recorded once; a "
                "duplicated row would count twice"
            )
        seen[ident] = i
    for i, row in enumerate(rows):
        if row.tpot_ms is not None:
            agree(row.tpot_ms, row.own_tpot, f"requests[{i}].tpot_ms")


def _planned_rows(planned: int | None, rows: Sequence[ServeRequest]) -> None:
    """No (rate, arm, repeat) holds more rows than the requests the run planned."""
    if not planned:
        return
    for (rate, arm, rep), n in Counter((r.rate, r.arm, r.repeat) for r in rows).items():
        if n > planned:
            raise Disagreement(
                f"requests: rate {rate}, {arm}, repeat {rep} holds {n} rows but the run "
                f"planned {planned} requests: a row is duplicated or foreign"
            )


def _written_order(key: str) -> tuple[int, int, float]:
    """A per-rate row's latency figures in the order the writers write them (per latency:
    mean, median, then the percentiles), so the first disagreement named is the same
    whatever order the typed row keeps its fields in."""
    metric, _, stat = key.removesuffix("_ms").partition("_")
    try:
        q = float(stat.removeprefix("p"))
    except ValueError:
        q = -1.0
    named = ("mean", "median")
    return LATENCIES.index(metric), named.index(stat) if stat in named else 2, q


def _row_agrees(i: int, res: ServeRow, derived: ServeDerived) -> None:
    """A per-rate row's stated figures against what the rows give (a latency statistic
    without samples: nothing to check)."""
    cell = derived.cell(res.rate, res.arm)
    stated = res.model_dump(exclude_unset=True)
    given: dict[str, float | None] = {"completed": float(cell.completed)}
    figures = [k for k in stated if k.startswith(_FIGURE_PREFIXES) and k.endswith("_ms")]
    for key in sorted(figures, key=_written_order):
        metric, _, stat = key.removesuffix("_ms").partition("_")
        if (v := cell.stat(metric, stat)) is not None:  # a mean or a percentile
            given[key] = v
    for key in THROUGHPUTS:
        given[key] = cell.throughput(key)
    good = cell.good_requests
    given["good_requests"] = None if good is None else float(good)
    for key, value in given.items():
        if key in stated:
            agree(stated[key], value, f"results[{i}].{key}")


def _ab_agrees(report: ServeReport, derived: ServeDerived) -> None:
    """``ab.<rate>.<arm>.<figure>``: the values and delta the rows give (base: the
    baseline arm, else the first)."""
    if derived.base is None:
        return
    for rate, per_arm in report.ab.items():
        for arm, metrics in (per_arm or {}).items():
            if metrics is None or arm == derived.base or "_vs_" in arm:
                continue
            for figure in COMPARED:
                got = metrics.get(figure.key)
                if got is None or got.delta_pct is None:
                    continue
                point = derived.point(rate, arm, figure)
                if point is None:
                    continue
                at = f"ab.{rate}.{arm}.{figure.key}"
                agree(got.delta_pct, point.delta_pct, f"{at}.delta_pct")
                agree(got.a_value, point.a_value, f"{at}.a_value")
                agree(got.b_value, point.b_value, f"{at}.b_value")


def _near(stated: float, derived: float) -> bool:
    return math.isclose(stated, derived, rel_tol=TOOL_REL_TOL, abs_tol=TOOL_ABS_TOL_MS)


def _median_fits(stated: float, xs: list[float]) -> bool:
    """A tool's median may take the lower, upper or mean middle value (any convention)."""
    s = sorted(xs)
    lo, hi = s[(len(s) - 1) // 2], s[len(s) // 2]
    return (
        lo - TOOL_REL_TOL * abs(lo) - TOOL_ABS_TOL_MS
        <= stated
        <= hi + (TOOL_REL_TOL * abs(hi) + TOOL_ABS_TOL_MS)
    )


def _tool_agrees(report: ServeReport, rows: Sequence[ServeRequest]) -> None:
    """An imported report: the rows of each arm and repeat against the figures the peer
    tool itself wrote in the same file (``config.source.arms.<arm>.stated``: the peer's
    figures as written, read as JSON)."""
    cfg = report.config
    label = (cfg.rate_labels or [None])[0]
    for arm, src in ((cfg.source and cfg.source.arms) or {}).items():
        if not isinstance(src, dict) or src.get("per_request") is False:
            continue  # a summary-only file: no rows to check its figures against
        stated = src.get("stated")
        for k, figures in enumerate(stated if isinstance(stated, list) else []):
            mine = [r for r in rows if r.arm == arm and r.repeat == k
                    and (label is None or r.rate == label)]  # fmt: skip
            where = f"config.source.arms.{arm}.stated[{k}]"
            file = str(src.get("file") or arm)
            figures = figures if isinstance(figures, dict) else {}
            xs = samples(mine, "ttft")
            done = figures.get("completed")
            if isinstance(done, (int, float)) and not isinstance(done, bool) and done != len(xs):
                _refuse(where, file, "completed", float(done), float(len(xs)), " requests")
            _stated_agrees(figures, "ttft", xs, ("mean", "median"), where, file)
            # sglang.bench_serving and vllm bench serve pool every gap of the served requests
            itls = samples(mine, "itl")
            _stated_agrees(figures, "itl", itls, ("mean", "median", "p99"), where, file)


def _refuse(where: str, file: str, key: str, tool: float, rows_value: float, unit: str) -> None:
    raise Disagreement(
        f"{where}.{key}: {file}'s own summary says {tool:.6g}{unit} but its per-request "
        f"rows give {rows_value:.6g}{unit}: the rows disagree with the tool's summary "
        "(an edited file?)"
    )


def _stated_agrees(
    figures: Mapping[str, object],
    metric: str,
    xs: list[float],
    which: tuple[str, ...],
    where: str,
    file: str,
) -> None:
    """The tool's own ``<mean|median|p99>_<metric>_ms`` against the rows' samples (numpy's
    percentile, as the tools compute them; a median of any middle-value convention)."""
    if not xs:
        return
    derived = rows_summary(xs)
    for q in which:
        key = f"{q}_{metric}_ms"
        stated = figures.get(key)
        if not isinstance(stated, (int, float)):
            continue
        value = float(stated)
        if not (_median_fits(value, xs) if q == "median" else _near(value, derived[q])):
            _refuse(where, file, key, value, derived[q], " ms")


def serve_disagreement(report: ServeReport) -> None:
    """The read check of a serve-ab report (Disagreement naming the first field that
    disagrees with the rows)."""
    cfg, rows = report.config, report.requests
    per_request = cfg.per_request is not False
    if not per_request and rows:
        raise Disagreement("config.per_request is false but the report has request rows")
    check_rows(rows)
    _planned_rows(cfg.requests, rows)
    derived = _derive(cfg, [str(a) for a in report.summary.arms or cfg.arms], rows)
    for i, res in enumerate(report.results):
        if per_request:
            _row_agrees(i, res, derived)
    if per_request and not isinstance(report, EarlierServeReport):
        _ab_agrees(report, derived)
    if cfg.imported:
        _tool_agrees(report, rows)
