"""The serving figures of a serve-ab report against its request rows (see ``agree``):
each row's TPOT against its own E2E, TTFT and output tokens; each per-rate row's ITL,
TPOT and E2E percentiles, throughputs and goodput against the rows they came from
(``report.serve_figures``, the writer's own derivation); the A/B block's ITL, TPOT, E2E
and goodput comparisons against the same. An edited figure is refused on read."""

from __future__ import annotations

from typing import Any

import kimi_bench.report.serve_figures as sf
from kimi_bench.infra.stats import pct_delta, percentile
from kimi_bench.report.agree import Disagreement, agree, block, number

Dict = dict[str, Any]
_FIGURE_PREFIXES = tuple(f"{m}_" for m in sf.LATENCIES)


def rows_agree(rows: list[Dict]) -> None:
    """Each row's ITL list holds numbers >= 0 and its TPOT is its own (E2E - TTFT) /
    (output tokens - 1)."""
    for i, row in enumerate(rows):
        itl = row.get("itl_ms")
        if itl is not None:
            if not isinstance(itl, list):
                raise Disagreement(f"requests[{i}].itl_ms must be a list of gaps in ms")
            for k, x in enumerate(itl):
                number(x, f"requests[{i}].itl_ms[{k}]")
        if row.get("tpot_ms") is not None:
            agree(row["tpot_ms"], sf.tpot_of(row), f"requests[{i}].tpot_ms")


def _derived(res: Dict, mine: list[Dict], slo: Dict) -> dict[str, float]:
    """What the rows give for the figures a per-rate row states."""
    out: dict[str, float] = {}
    for key in res:
        if not (key.startswith(_FIGURE_PREFIXES) and key.endswith("_ms")) or key == "ttft_mean_ms":
            continue
        metric, _, stat = key.removesuffix("_ms").partition("_")
        xs = sf.samples(mine, metric)
        if not xs:
            continue
        if stat == "mean":
            out[key] = sum(xs) / len(xs)
        elif stat == "median" or (stat.startswith("p") and stat[1:].replace("_", "").isdigit()):
            q = 50.0 if stat == "median" else float(stat[1:].replace("_", "."))
            out[key] = percentile(xs, q)
    for key, values in sf.throughputs(mine, slo).items():
        out[key] = sum(values) / len(values)
    if slo:
        out["good_requests"] = float(sum(1 for r in mine if sf.meets(r, slo)))
    return out


def results_agree(raw: Dict, rows: list[Dict]) -> None:
    slo = sf.slos(block(raw, "config"))
    for i, res in enumerate(raw.get("results") or []):
        if not isinstance(res, dict):
            continue
        mine = [r for r in rows if r["rate"] == str(res.get("rate")) and r["arm"] == str(
            res.get("arm"))]  # fmt: skip
        derived = _derived(res, mine, slo)
        for key in (*derived, *sf.THROUGHPUTS, "good_requests"):
            if key in res:
                agree(res[key], derived.get(key), f"results[{i}].{key}")


def ab_agrees(raw: Dict, rows: list[Dict], base: str) -> None:
    """``ab.<rate>.<arm>.median_<itl|tpot|e2e>`` and ``.goodput``: values and delta."""
    slo = sf.slos(block(raw, "config"))
    for rate, per_arm in block(raw, "ab").items():
        for arm, metrics in (per_arm or {}).items():
            if not isinstance(metrics, dict) or arm == base or "_vs_" in arm:
                continue
            a = [r for r in rows if r["rate"] == rate and r["arm"] == base]
            b = [r for r in rows if r["rate"] == rate and r["arm"] == arm]
            pairs = {
                f"median_{m}": (sf.samples(a, m), sf.samples(b, m)) for m in ("itl", "tpot", "e2e")
            }
            if slo:
                good = "goodput_req_per_s"
                pairs["goodput"] = (
                    sf.throughputs(a, slo).get(good, []),
                    sf.throughputs(b, slo).get(good, []),
                )
            for name, (xa, xb) in pairs.items():
                got = metrics.get(name)
                if not isinstance(got, dict) or not xa or not xb or got.get("delta_pct") is None:
                    continue
                at = f"ab.{rate}.{arm}.{name}"
                va, vb = percentile(xa, 50), percentile(xb, 50)
                agree(got["delta_pct"], pct_delta(va, vb), f"{at}.delta_pct")
                agree(got.get("a_value"), va, f"{at}.a_value")
                agree(got.get("b_value"), vb, f"{at}.b_value")
