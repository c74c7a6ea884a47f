"""The serving figures of a serve-ab report, derived from its request rows in one place:
the writer (``bench.serve_report``) puts them in the per-rate rows and the A/B block, the
reader (``report.agree_serve``) recomputes them to refuse an edited figure, and the gate
(``ci``) recomputes them to check its rules.

Per request (the row's raw data): ``ttft_ms``, ``itl_ms`` (every gap between two chunks
that carried text), ``tpot_ms`` = (E2E - TTFT) / (output tokens - 1) and ``e2e_ms`` (send
to the stream's end), as sglang.bench_serving and vllm bench serve define them; ITL
percentiles are over every gap of every request, as both tools compute them.

Per (rate, arm, repeat): the duration is the last response's end, in seconds from the
trace start (``end_s``), the peers' benchmark duration. Output-token throughput, image
throughput (images and megapixels of the completed requests per second) and **goodput**
(requests that meet every SLO per second; vllm's and sglang's ``--goodput ttft:MS
tpot:MS e2el:MS``; a request with one output token has no TPOT and meets a TPOT SLO, as
theirs) are per repeat; the per-rate figure is their mean over repeats."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kimi_bench.infra.stats import percentile
from kimi_bench.options.parse import parse_goodput

# a request row as the writer builds it (``bench.serve_types.RequestRow``) or as read back
Row = Mapping[str, Any]
R = TypeVar("R", bound=Row)
LATENCIES = ("ttft", "itl", "tpot", "e2e")  # the per-request latencies, in ms
THROUGHPUTS = ("output_tokens_per_s", "images_per_s_e2e", "megapixels_per_s", "goodput_req_per_s")
SLO_METRIC = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2e_ms"}


def served(row: Row) -> bool:
    """A request counts as served only with no error, a TTFT and a 2xx (or no) status."""
    status = row.get("status")
    good_status = status is None or (isinstance(status, int) and 200 <= status < 300)
    return row.get("error") is None and row.get("ttft_ms") is not None and good_status


def pct_name(q: float) -> str:
    """50 -> ``median``; 99.9 -> ``p99_9`` (a key part: no dot)."""
    return "median" if q == 50 else "p" + f"{q:g}".replace(".", "_")


def _num(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def samples(rows: Iterable[Row], metric: str) -> list[float]:
    """A latency's samples (ms) over the served rows; ITL: every gap of every request."""
    out: list[float] = []
    for r in rows:
        if not served(r):
            continue
        if metric == "itl":
            out += [float(x) for x in r.get("itl_ms") or [] if _num(x) is not None]
        elif (v := _num(r.get(f"{metric}_ms"))) is not None:
            out.append(v)
    return out


def latency_figures(rows: Sequence[Row], percentiles: Sequence[float]) -> dict[str, float]:
    """``<metric>_mean_ms`` and ``<metric>_<pct>_ms`` of every latency with samples."""
    out: dict[str, float] = {}
    for metric in LATENCIES:
        xs = samples(rows, metric)
        if not xs:
            continue
        out[f"{metric}_mean_ms"] = sum(xs) / len(xs)
        for q in percentiles:
            out[f"{metric}_{pct_name(q)}_ms"] = percentile(xs, q)
    return out


def tpot_of(row: Row) -> float | None:
    """The TPOT a row's own E2E, TTFT and output tokens give (None with one token)."""
    e2e, ttft, n = _num(row.get("e2e_ms")), _num(row.get("ttft_ms")), row.get("output_tokens")
    if e2e is None or ttft is None or not isinstance(n, int) or n < 2:
        return None
    return (e2e - ttft) / (n - 1)


def slos(config: Mapping[str, Any]) -> dict[str, float]:
    """The report's goodput SLOs (``config.goodput``), {} when none were given."""
    given = config.get("goodput")
    return parse_goodput(given) if given else {}


def meets(row: Row, slo: Mapping[str, float]) -> bool:
    """A served request within every SLO (a missing TPOT meets a TPOT SLO)."""
    if not served(row):
        return False
    for key, limit in slo.items():
        v = _num(row.get(SLO_METRIC[key]))
        if v is None and key == "tpot":
            continue
        if v is None or v > limit:
            return False
    return True


def by_repeat(rows: Iterable[R]) -> dict[int, list[R]]:
    out: dict[int, list[R]] = {}
    for r in rows:
        rep = r.get("repeat", 0)
        out.setdefault(rep if isinstance(rep, int) else 0, []).append(r)
    return out


def duration_s(rows: Sequence[Row]) -> float | None:
    """A repeat's duration: its last response's end from the trace start (None without
    client times: the in-process load generator records none)."""
    ends = [e for r in rows if (e := _num(r.get("end_s"))) is not None]
    return max(ends) if ends and max(ends) > 0 else None


def repeat_throughputs(rows: Sequence[Row], slo: Mapping[str, float]) -> dict[str, float]:
    """One repeat's throughputs over its duration (none without one)."""
    dur = duration_s(rows)
    if dur is None:
        return {}
    ok = [r for r in rows if served(r)]
    out = {
        "output_tokens_per_s": sum(int(r.get("output_tokens") or 0) for r in ok) / dur,
        "images_per_s_e2e": sum(int(r.get("images") or 0) for r in ok) / dur,
        "megapixels_per_s": sum(int(r.get("pixels") or 0) for r in ok) / dur / 1e6,
    }
    if slo:
        out["goodput_req_per_s"] = sum(1 for r in ok if meets(r, slo)) / dur
    return out


def throughputs(rows: Sequence[Row], slo: Mapping[str, float]) -> dict[str, list[float]]:
    """Each throughput per repeat, in repeat order."""
    out: dict[str, list[float]] = {}
    for _, reps in sorted(by_repeat(rows).items()):
        for key, v in repeat_throughputs(reps, slo).items():
            out.setdefault(key, []).append(v)
    return out


def rate_figures(
    rows: Sequence[Row], percentiles: Sequence[float], slo: Mapping[str, float]
) -> dict[str, Any]:
    """The per-rate row's serving figures of one arm's request rows."""
    per_repeat = throughputs(rows, slo)
    ok = [r for r in rows if served(r)]
    good = sum(1 for r in ok if meets(r, slo)) if slo else None
    out: dict[str, Any] = dict(latency_figures(rows, percentiles))
    for key, xs in per_repeat.items():
        out[key] = sum(xs) / len(xs)
    out["output_tokens"] = sum(int(r.get("output_tokens") or 0) for r in ok)
    if good is not None:
        out["good_requests"] = good
    return out


def unbilled_images(rows: Sequence[Row], text_only: int | None) -> int:
    """Served requests with images whose usage shows no image tokens: the server said 0
    image tokens, or billed no more prompt tokens than the same prompt without images
    (``text_only``; a benchmark that never reached the vision tower, sglang #21294)."""
    n = 0
    for r in rows:
        if not served(r) or not r.get("images"):
            continue
        image, prompt = r.get("prompt_image_tokens"), r.get("prompt_tokens")
        if image == 0 or (
            image is None and isinstance(prompt, int) and text_only is not None
            and prompt <= text_only
        ):  # fmt: skip
            n += 1
    return n
