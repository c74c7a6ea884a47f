"""Derived blocks of the row-based kinds against their rows (see ``agree``): serve-ab (one
row per request; imported reports also against the peer tool's own summary figures) and
parity (one row per input), and :func:`disagreement`, the entry point ``check_envelope``
calls for every report it reads."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import kimi_bench.report.agree_serve as agree_serve
import kimi_bench.report.serve_figures as serve_figures
from kimi_bench.infra.stats import Measurement, pct_delta, percentile
from kimi_bench.report.agree import (
    EDITED,
    Disagreement,
    agree,
    as_list,
    block,
    micro_disagreement,
    number,
)
from kimi_bench.report.roles import baseline_arm
from kimi_bench.results import ResultError, derive_parity, has_fp32, parity_rows

Dict = dict[str, Any]
# A peer tool's own summary against its rows: beyond this the file was edited (the tools
# compute their figures from the same per-request numbers; only rounding may differ).
TOOL_REL_TOL = 1e-3
TOOL_ABS_TOL_MS = 1e-3


served = serve_figures.served  # a request with no error, a TTFT and a 2xx (or no) status


# ------------------------------------------------------------------------------ serve-ab


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


def _planned_rows(raw: Dict, rows: list[Dict]) -> None:
    """No (rate, arm, repeat) holds more rows than the requests the run planned."""
    planned = block(raw, "config").get("requests")
    if not isinstance(planned, int) or isinstance(planned, bool) or planned < 1:
        return
    for (rate, arm, rep), n in Counter(
        (r["rate"], r["arm"], r.get("repeat", 0)) for r in rows
    ).items():
        if n > planned:
            raise Disagreement(
                f"requests: rate {rate}, {arm}, repeat {rep} holds {n} rows but the run "
                f"planned {planned} requests: a row is duplicated or foreign"
            )


def _ttfts(rows: list[Dict], rate: str, arm: str) -> list[float]:
    return [float(r["ttft_ms"]) for r in rows if r["rate"] == rate and r["arm"] == arm
            and served(r)]  # fmt: skip


def _results_agree(raw: Dict, rows: list[Dict], per_request: bool) -> None:
    """Each per-rate row against the request rows: served requests, and (reports with
    rows) its TTFT mean, median and percentiles."""
    for i, res in enumerate(raw.get("results") or []):
        if not isinstance(res, dict):
            continue
        rate, arm = str(res.get("rate")), str(res.get("arm"))
        if res.get("failed") is not None:
            number(res["failed"], f"results[{i}].failed")
        if not per_request:
            continue
        xs = _ttfts(rows, rate, arm)
        if "completed" in res:
            agree(res["completed"], float(len(xs)), f"results[{i}].completed")
        if not xs:
            continue
        m = Measurement(xs)
        derived = {"ttft_mean_ms": m.mean, "ttft_median_ms": m.median, "ttft_p90_ms": m.p90,
                   "ttft_p99_ms": percentile(xs, 99)}  # fmt: skip
        for key, value in derived.items():
            agree(res.get(key), value, f"results[{i}].{key}")


def _ab_agrees(raw: Dict, rows: list[Dict]) -> None:
    """``ab.<rate>.<arm>.<median_ttft|p90_ttft>``: the values and delta of the request rows
    (base: eager, else the first arm)."""
    arms = [str(a) for a in block(raw, "summary").get("arms") or block(raw, "config").get(
        "arms") or []]  # fmt: skip
    if not arms:
        return
    base = baseline_arm(block(raw, "config"), arms) or arms[0]
    for rate, per_arm in block(raw, "ab").items():
        for arm, metrics in (per_arm or {}).items():
            if not isinstance(metrics, dict) or arm == base:
                continue
            a, b = _ttfts(rows, rate, base), _ttfts(rows, rate, arm)
            for name, q in (("median_ttft", 50), ("p90_ttft", 90)):
                got = metrics.get(name)
                if not isinstance(got, dict) or not a or not b or got.get("delta_pct") is None:
                    continue
                at = f"ab.{rate}.{arm}.{name}"
                agree(got["delta_pct"], pct_delta(percentile(a, q), percentile(b, q)),
                      f"{at}.delta_pct")  # fmt: skip
                agree(got.get("a_value"), percentile(a, q), f"{at}.a_value")
                agree(got.get("b_value"), percentile(b, q), f"{at}.b_value")


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


def _tool_agrees(raw: Dict, rows: list[Dict]) -> None:
    """An imported report: the rows of each arm and repeat against the figures the peer
    tool itself wrote in the same file (``config.source.arms.<arm>.stated``)."""
    label = (block(raw, "config").get("rate_labels") or [None])[0]
    for arm, src in block(raw, "config", "source", "arms").items():
        if not isinstance(src, dict) or src.get("per_request") is False:
            continue  # a summary-only file: no rows to check its figures against
        stated = src.get("stated")
        for k, figures in enumerate(stated if isinstance(stated, list) else []):
            mine = [r for r in rows if r["arm"] == arm and r.get("repeat", 0) == k
                    and (label is None or r["rate"] == label)]  # fmt: skip
            where = f"config.source.arms.{arm}.stated[{k}]"
            file = str(src.get("file") or arm)
            figures = figures if isinstance(figures, dict) else {}
            xs = serve_figures.samples(mine, "ttft")
            done = figures.get("completed")
            if isinstance(done, (int, float)) and not isinstance(done, bool) and done != len(xs):
                _refuse(where, file, "completed", float(done), float(len(xs)), " requests")
            _stated_agrees(figures, "ttft", xs, ("mean", "median"), where, file)
            # sglang.bench_serving and vllm bench serve pool every gap of the served requests
            itls = serve_figures.samples(mine, "itl")
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
    derived = {"mean": Measurement(xs).mean, "median": percentile(xs, 50),
               "p99": percentile(xs, 99)}  # fmt: skip
    for q in which:
        key = f"{q}_{metric}_ms"
        stated = figures.get(key)
        if not isinstance(stated, (int, float)):
            continue
        value = float(stated)
        if not (_median_fits(value, xs) if q == "median" else _near(value, derived[q])):
            _refuse(where, file, key, value, derived[q], " ms")


def serve_disagreement(raw: Dict) -> None:
    cfg = block(raw, "config")
    per_request = cfg.get("per_request") is not False
    rows = as_list(raw.get("requests"), "requests")
    if not per_request and rows:
        raise Disagreement("config.per_request is false but the report has request rows")
    check_rows(rows)
    agree_serve.rows_agree(rows)
    _planned_rows(raw, rows)
    _results_agree(raw, rows, per_request)
    if per_request:
        _ab_agrees(raw, rows)
        agree_serve.results_agree(raw, rows)
        arms = [str(a) for a in block(raw, "summary").get("arms") or cfg.get("arms") or []]
        if arms:
            agree_serve.ab_agrees(raw, rows, baseline_arm(cfg, arms) or arms[0])
    if cfg.get("imported"):
        _tool_agrees(raw, rows)


# -------------------------------------------------------------------------------- parity


def parity_disagreement(raw: Dict) -> None:
    try:
        fp32 = has_fp32(raw.get("config"))
        derived = derive_parity(parity_rows(raw.get("results"), fp32), fp32)
    except ResultError as exc:
        raise Disagreement(str(exc)) from None
    if problem := derived.disagreement(block(raw, "summary")):
        raise Disagreement(f"{problem}: {EDITED}")


_BY_KIND = {"micro": micro_disagreement, "serve-ab": serve_disagreement,
            "parity": parity_disagreement}  # fmt: skip


def disagreement(raw: Dict) -> str | None:
    """Why a report's derived blocks cannot be trusted (naming the field), or None. ``raw``
    is a report dict in the current layout whose types have been validated."""
    check = _BY_KIND.get(str(raw.get("kind")))
    if check is None:
        return None
    try:
        check(raw)
    except Disagreement as exc:
        return str(exc)
    return None
