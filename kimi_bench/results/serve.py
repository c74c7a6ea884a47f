"""serve-ab's results: one row per request (``ServeRequest``), a report's raw data
(``ServeRaw``: the rows, the goodput SLOs, the arms) and the serving figures derived from
them (``ServeDerived``), derived once by ``derive_serve``. The writer fills its per-rate rows
from it, the read check holds the stated rows and A/B block against it, and the gate and
the importers take their figures from it.

Per request: ``ttft_ms``, ``itl_ms`` (every gap between two chunks that carried text),
``tpot_ms`` = (E2E - TTFT) / (output tokens - 1) and ``e2e_ms`` (send to the stream's end),
as sglang.bench_serving and vllm bench serve define them; ITL percentiles are over every
gap of every request, as both tools compute them. A request counts as served only with no
error, a TTFT and a 2xx (or no) status.

Per (rate, arm, repeat): the duration is the last response's end, in seconds from the
trace start (``end_s``), the peers' benchmark duration. Output-token throughput, image
throughput (images and megapixels of the completed requests per second) and **goodput**
(requests that meet every SLO per second; vllm's and sglang's ``--goodput ttft:MS tpot:MS
e2el:MS``; a request with one output token has no TPOT and meets a TPOT SLO, as theirs)
are per repeat; the per-rate figure is their mean over repeats.

TTFT's independent units: requests served in one forward batch share their first token, so
a batch is one unit (``repeat:batch``); a server that reports no batches makes each
request its own unit (``repeat:r<rid>``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from kimi_bench.infra.stats import Measurement, pct_delta, percentile
from kimi_bench.results.serve_rows import (
    GOODPUT,
    LATENCIES,
    ServeRequest,
    bootstrap_interval,
    finite,
    pct_name,
    pct_of,
    repeat_throughputs,
    samples,
)


@dataclass(frozen=True)
class Point:
    """One arm against the base arm on one figure: the two values and the signed
    percentage B minus A (what the A/B block states beside its interval)."""

    a_value: float
    b_value: float
    delta_pct: float


class StatedInterval(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    low: float | None = None
    high: float | None = None
    kind: str | None = None


class StatedComparison(BaseModel):
    """One figure of the A/B block as a report states it: the values and delta (what the
    read check holds against ``ServeDerived.point``) and the writer's interval and verdict."""

    model_config = ConfigDict(extra="allow", frozen=True)
    a_label: str | None = None
    b_label: str | None = None
    delta_pct: float | None = None
    interval: StatedInterval | None = None
    significant: bool | None = None
    verdict: str | None = None

    @classmethod
    def read(cls, block: Any) -> StatedComparison:
        """A stated comparison; an absent or unreadable one has every field None."""
        try:
            return cls.model_validate(block) if isinstance(block, dict) else cls()
        except ValidationError:
            return cls()


@dataclass(frozen=True)
class ArmCell:
    """One arm at one rate: its request rows, and every figure they give (each derived
    on first use, once)."""

    rate: str
    arm: str
    rows: tuple[ServeRequest, ...]
    slo: Mapping[str, float] = field(default_factory=dict)

    @cached_property
    def served(self) -> tuple[ServeRequest, ...]:
        return tuple(r for r in self.rows if r.served)

    def samples(self, metric: str) -> list[float]:
        return samples(self.served, metric)

    @property
    def completed(self) -> int:
        return len(self.served)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens or 0 for r in self.served)

    @property
    def good_requests(self) -> int | None:
        return sum(1 for r in self.served if r.meets(self.slo)) if self.slo else None

    def stat(self, metric: str, stat: str) -> float | None:
        """``mean`` or a percentile (``median``, ``p90``, ``p99_9``) of a latency; None
        without samples or for another statistic."""
        xs = self.samples(metric)
        if not xs:
            return None
        if stat == "mean":
            return sum(xs) / len(xs)
        q = pct_of(stat)
        return None if q is None else percentile(xs, q)

    def interval(self, metric: str, q: float) -> tuple[float, float] | None:
        """A page's band around a latency's percentile: 95% bootstrap over single samples."""
        return bootstrap_interval(self.samples(metric), q)

    def median(self, metric: str) -> float | None:
        """numpy's median of a latency's samples (None without)."""
        xs = self.samples(metric)
        return float(np.median(xs)) if xs else None

    def stage_medians(
        self, stages: Sequence[str], center: Callable[[list[float]], float] = np.median
    ) -> dict[str, float]:
        """Median ms of each pipeline stage (its column's name) over the served requests
        that time it; ``center``: how the median is taken (numpy's by default)."""
        out = {}
        for key in stages:
            xs = [x for r in self.served if (x := finite(r.stage_ms.get(key))) is not None]
            if xs:
                out[key] = float(center(xs))
        return out

    @property
    def bytes_moved(self) -> int:
        """Bytes the served requests' producer and scheduler copied."""
        return sum(
            (r.producer_copied_bytes or 0) + (r.scheduler_copied_bytes or 0) for r in self.served
        )

    @property
    def batched(self) -> bool:
        """Whether the server reported forward batches (TTFT's units are batches)."""
        return any(r.batch_id is not None for r in self.served)

    def mean_images(self, default: float) -> float:
        """Images a served request carried, on average (``default`` when none says)."""
        counts = [r.images for r in self.served if r.images is not None]
        return sum(counts) / len(counts) if counts else float(default)

    def repeats(self) -> dict[int, list[ServeRequest]]:
        out: dict[int, list[ServeRequest]] = {}
        for r in self.rows:
            out.setdefault(r.repeat, []).append(r)
        return out

    @cached_property
    def throughputs(self) -> dict[str, list[float]]:
        """Each throughput per repeat, in repeat order (none without client times)."""
        out: dict[str, list[float]] = {}
        for _, reps in sorted(self.repeats().items()):
            for key, v in repeat_throughputs(reps, self.slo).items():
                out.setdefault(key, []).append(v)
        return out

    def throughput(self, key: str) -> float | None:
        """A throughput's mean over repeats (None without client times)."""
        xs = self.throughputs.get(key)
        return sum(xs) / len(xs) if xs else None

    def latency_figures(self, percentiles: Sequence[float]) -> dict[str, float]:
        """``<metric>_mean_ms`` and ``<metric>_<pct>_ms`` of every latency with samples."""
        out: dict[str, float] = {}
        for metric in LATENCIES:
            xs = self.samples(metric)
            if not xs:
                continue
            out[f"{metric}_mean_ms"] = sum(xs) / len(xs)
            for q in percentiles:
                out[f"{metric}_{pct_name(q)}_ms"] = percentile(xs, q)
        return out

    def rate_figures(self, percentiles: Sequence[float]) -> dict[str, Any]:
        """The serving figures of the writer's per-rate row, in its key order."""
        out: dict[str, Any] = dict(self.latency_figures(percentiles))
        for key, xs in self.throughputs.items():
            out[key] = sum(xs) / len(xs)
        out["output_tokens"] = self.output_tokens
        if self.slo:
            out["good_requests"] = self.good_requests
        return out

    def measurement(self, metric: str, label: str = "") -> Measurement:
        """A latency's served samples over their independent units (forward batches, else
        requests): every metric over the same units, so one comparison has one statistic."""
        pairs = [(x, r.unit) for r in self.served for x in r.values(metric)]
        return Measurement([x for x, _ in pairs], unit="ms", label=label,
                           unit_ids=[u for _, u in pairs])  # fmt: skip

    def counts(self) -> tuple[dict[int, int], dict[int, int]]:
        """Rows and served rows per repeat."""
        seen: dict[int, int] = {}
        ok: dict[int, int] = {}
        for r in self.rows:
            seen[r.repeat] = seen.get(r.repeat, 0) + 1
            ok[r.repeat] = ok.get(r.repeat, 0) + r.served
        return seen, ok


@dataclass(frozen=True)
class Compared:
    """A figure the A/B block compares: its key, its label, the latency it is a statistic
    of (None: goodput, per repeat) and the percentile."""

    key: str
    label: str
    metric: str | None
    q: float

    def value(self, cell: ArmCell) -> float | None:
        """One arm's figure: the percentile of a latency's samples, or goodput's mean over
        repeats (None: no samples, or no client times to count goodput over)."""
        if self.metric is None:
            return cell.throughput(GOODPUT)
        xs = cell.samples(self.metric)
        return percentile(xs, self.q) if xs else None


# The A/B figures a report derives from its rows (the writer adds throughput from its
# runs), under the names the A/B block, its table and the gate's delta rules use.
COMPARED = (
    Compared("median_ttft", "median TTFT", "ttft", 50),
    Compared("p90_ttft", "p90 TTFT", "ttft", 90),
    Compared("median_itl", "median ITL", "itl", 50),
    Compared("median_tpot", "median TPOT", "tpot", 50),
    Compared("median_e2e", "median E2E", "e2e", 50),
    Compared("goodput", "goodput", None, 50),
)
# The absolute limits of ``[serve_ab.<rate>]`` each arm is held to, by rule key.
LIMITS = {
    "min_goodput": Compared("goodput", "goodput", None, 50),
    **{f"max_p99_{m}_ms": Compared(f"p99_{m}", f"p99 {m.upper()}", m, 99) for m in LATENCIES},
}
# What a baseline's ``serve_ab.<rate>.<arm>.<name>`` samples are: the served TTFTs.
SAMPLED = {"ttft_ms": "ttft"}


@dataclass(frozen=True)
class ServeRaw:
    """A serve-ab report's raw data: its request rows, the goodput SLOs it was run with
    ({} when none), the arms and the one every other is compared with."""

    requests: tuple[ServeRequest, ...]
    slo: Mapping[str, float] = field(default_factory=dict)
    arms: tuple[str, ...] = ()
    base: str | None = None


@dataclass(frozen=True)
class ServeDerived:
    """Every figure of a serve-ab report's rows, per (rate, arm)."""

    cells: Mapping[tuple[str, str], ArmCell]
    slo: Mapping[str, float]
    base: str | None
    stages: tuple[str, ...] = ()  # the pipeline stages the rows time, in their order

    def cell(self, rate: str, arm: str) -> ArmCell:
        """One arm at one rate (no rows: an empty cell)."""
        return self.cells.get((rate, arm)) or ArmCell(rate, arm, (), self.slo)

    def sides(self, rate: str, arm: str, figure: Compared) -> tuple[list[float], list[float]]:
        """The base arm's and ``arm``'s samples of a compared figure at ``rate``."""
        a, b = self.cell(rate, self.base or ""), self.cell(rate, arm)
        if figure.metric is None:
            return a.throughputs.get(GOODPUT, []), b.throughputs.get(GOODPUT, [])
        return a.samples(figure.metric), b.samples(figure.metric)

    def point(self, rate: str, arm: str, figure: Compared) -> Point | None:
        """``arm`` against the base arm on ``figure`` (None: a side without samples)."""
        xa, xb = self.sides(rate, arm, figure)
        if not xa or not xb:
            return None
        va, vb = percentile(xa, figure.q), percentile(xb, figure.q)
        return Point(va, vb, pct_delta(va, vb))


def derive_serve(raw: ServeRaw) -> ServeDerived:
    """The figures of every (rate, arm) of ``raw``'s rows."""
    groups: dict[tuple[str, str], list[ServeRequest]] = {}
    for r in raw.requests:
        groups.setdefault((r.rate, r.arm), []).append(r)
    cells = {k: ArmCell(k[0], k[1], tuple(rs), raw.slo) for k, rs in groups.items()}
    stages = tuple(raw.requests[0].stage_ms) if raw.requests else ()
    return ServeDerived(cells, raw.slo, raw.base, stages)
