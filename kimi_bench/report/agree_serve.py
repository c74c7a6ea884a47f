"""A serve-ab report's stated figures against what its request rows give (see ``agree``),
in one place: the rows are read as typed rows (``results.serve``) and every figure is
``derive_serve``'s. Each row's TPOT against its own E2E, TTFT and output tokens; each per-rate
row's completed requests, latency statistics, throughputs and goodput; the A/B block's
values and deltas; an imported report's rows against the figures the peer tool itself wrote
in the same file. An edited figure is refused on read."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from kimi_bench.options.parse import parse_goodput
from kimi_bench.report.agree import Disagreement, agree, as_list, block, number
from kimi_bench.report.roles import baseline_arm
from kimi_bench.results import ResultError
from kimi_bench.results.peer_stats import rows_summary
from kimi_bench.results.serve import COMPARED, ServeDerived, ServeRaw, derive_serve
from kimi_bench.results.serve_rows import (
    LATENCIES,
    THROUGHPUTS,
    ServeRequest,
    samples,
    serve_requests,
)

Dict = dict[str, Any]
# A peer tool's own summary against its rows: beyond this the file was edited (the tools
# compute their figures from the same per-request numbers; only rounding may differ).
TOOL_REL_TOL = 1e-3
TOOL_ABS_TOL_MS = 1e-3
_FIGURE_PREFIXES = tuple(f"{m}_" for m in LATENCIES)


def slos(config: Dict) -> dict[str, float]:
    """The report's goodput SLOs (``config.goodput``), {} when none were given."""
    given = config.get("goodput")
    return parse_goodput(given) if given else {}


def serve_arms(config: Dict, summary: Dict) -> list[str]:
    return [str(a) for a in summary.get("arms") or config.get("arms") or []]


def serve_raw(config: Dict, summary: Dict, rows: list[ServeRequest]) -> ServeRaw:
    """A report's raw data: its typed rows, SLOs, arms and base arm (the baseline arm,
    else the first)."""
    arms = serve_arms(config, summary)
    base = (baseline_arm(config, arms) or arms[0]) if arms else None
    return ServeRaw(tuple(rows), slos(config), tuple(arms), base)


def derive_report(config: Dict, summary: Dict, rows: Any) -> ServeDerived:
    """``derive_serve`` of a report's blocks (rows already checked by the report model)."""
    return derive_serve(serve_raw(config, summary, serve_requests(rows)))


def check_rows(rows: list[Any]) -> None:
    """Each request row: an object with its rate and arm, numbers where numbers belong,
    and unique by (rate, arm, repeat, rid)."""
    seen: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(rows):
        at = f"requests[{i}]"
        if not isinstance(row, dict):
            raise Disagreement(f"{at} is not an object")
        for key in ("rate", "arm"):
            if not isinstance(row.get(key), str):
                raise Disagreement(f"{at}.{key} is missing")
        if row.get("ttft_ms") is not None:
            number(row["ttft_ms"], f"{at}.ttft_ms")
        for key, v in row.items():
            if key.endswith("_ms") and v is not None and key not in ("ttft_ms", "itl_ms"):
                number(v, f"{at}.{key}", minimum=None)
            if key.endswith("_bytes") and v is not None:
                number(v, f"{at}.{key}")
        status = row.get("status")
        if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
            raise Disagreement(f"{at}.status must be an integer, got {status!r}")
        itl = row.get("itl_ms")
        if itl is not None:
            if not isinstance(itl, list):
                raise Disagreement(f"{at}.itl_ms must be a list of gaps in ms")
            for k, x in enumerate(itl):
                number(x, f"{at}.itl_ms[{k}]")
        if row.get("rid") is None:
            continue
        ident = (row["rate"], row["arm"], row.get("repeat", 0), row["rid"])
        if ident in seen:
            raise Disagreement(
                f"{at} repeats requests[{seen[ident]}] (rate {ident[0]}, arm {ident[1]}, "
                f"repeat {ident[2]}, rid {ident[3]!r}): each request is recorded once; a "
                "duplicated row would count twice"
            )
        seen[ident] = i


def _planned_rows(raw: Dict, rows: list[ServeRequest]) -> None:
    """No (rate, arm, repeat) holds more rows than the requests the run planned."""
    planned = block(raw, "config").get("requests")
    if not isinstance(planned, int) or isinstance(planned, bool) or planned < 1:
        return
    for (rate, arm, rep), n in Counter((r.rate, r.arm, r.repeat) for r in rows).items():
        if n > planned:
            raise Disagreement(
                f"requests: rate {rate}, {arm}, repeat {rep} holds {n} rows but the run "
                f"planned {planned} requests: a row is duplicated or foreign"
            )


def _row_figures(res: Dict, derived: ServeDerived) -> dict[str, float | None]:
    """What the rows give for the figures a per-rate row states (a latency statistic
    without samples: nothing to check)."""
    cell = derived.cell(str(res.get("rate")), str(res.get("arm")))
    out: dict[str, float | None] = {"completed": float(cell.completed)}
    for key in res:
        if key.startswith(_FIGURE_PREFIXES) and key.endswith("_ms"):
            metric, _, stat = key.removesuffix("_ms").partition("_")
            if (v := cell.stat(metric, stat)) is not None:  # a mean or a percentile
                out[key] = v
    for key in THROUGHPUTS:
        out[key] = cell.throughput(key)
    good = cell.good_requests
    out["good_requests"] = None if good is None else float(good)
    return out


def _results_agree(raw: Dict, derived: ServeDerived, per_request: bool) -> None:
    for i, res in enumerate(raw.get("results") or []):
        if not isinstance(res, dict):
            continue
        if res.get("failed") is not None:
            number(res["failed"], f"results[{i}].failed")
        if not per_request:
            continue
        for key, value in _row_figures(res, derived).items():
            if key in res:
                agree(res[key], value, f"results[{i}].{key}")


def _ab_agrees(raw: Dict, derived: ServeDerived) -> None:
    """``ab.<rate>.<arm>.<figure>``: the values and delta the rows give (base: the
    baseline arm, else the first)."""
    if derived.base is None:
        return
    for rate, per_arm in block(raw, "ab").items():
        for arm, metrics in (per_arm or {}).items():
            if not isinstance(metrics, dict) or arm == derived.base or "_vs_" in arm:
                continue
            for figure in COMPARED:
                got = metrics.get(figure.key)
                if not isinstance(got, dict) or got.get("delta_pct") is None:
                    continue
                point = derived.point(rate, arm, figure)
                if point is None:
                    continue
                at = f"ab.{rate}.{arm}.{figure.key}"
                agree(got["delta_pct"], point.delta_pct, f"{at}.delta_pct")
                agree(got.get("a_value"), point.a_value, f"{at}.a_value")
                agree(got.get("b_value"), point.b_value, f"{at}.b_value")


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


def _tool_agrees(raw: Dict, rows: list[ServeRequest]) -> None:
    """An imported report: the rows of each arm and repeat against the figures the peer
    tool itself wrote in the same file (``config.source.arms.<arm>.stated``)."""
    label = (block(raw, "config").get("rate_labels") or [None])[0]
    for arm, src in block(raw, "config", "source", "arms").items():
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
    figures: Dict, metric: str, xs: list[float], which: tuple[str, ...], where: str, file: str
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


def serve_disagreement(raw: Dict) -> None:
    """The read check of a serve-ab report (Disagreement naming the first field that
    disagrees with the rows)."""
    cfg = block(raw, "config")
    per_request = cfg.get("per_request") is not False
    rows = as_list(raw.get("requests"), "requests")
    if not per_request and rows:
        raise Disagreement("config.per_request is false but the report has request rows")
    check_rows(rows)
    try:
        typed = serve_requests(rows)
    except ResultError as exc:
        raise Disagreement(str(exc)) from None
    for i, r in enumerate(typed):
        if r.tpot_ms is not None:
            agree(r.tpot_ms, r.own_tpot, f"requests[{i}].tpot_ms")
    _planned_rows(raw, typed)
    derived = derive_serve(serve_raw(cfg, block(raw, "summary"), typed))
    _results_agree(raw, derived, per_request)
    if per_request:
        _ab_agrees(raw, derived)
    if cfg.get("imported"):
        _tool_agrees(raw, typed)
