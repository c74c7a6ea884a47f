"""serve-ab's request rows, typed (``ServeRequest``), and what one row or one repeat's rows
give: a latency's samples, the repeat's throughputs and goodput (see ``results.serve``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from kimi_bench.results.base import typed_records

LATENCIES = ("ttft", "itl", "tpot", "e2e")  # the per-request latencies, in ms
GOODPUT = "goodput_req_per_s"
THROUGHPUTS = ("output_tokens_per_s", "images_per_s_e2e", "megapixels_per_s", GOODPUT)
SLO_METRIC = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2e_ms"}
_NOT_STAGES = ("itl_mean_ms",)  # a ``*_ms`` column that is no pipeline stage


def finite(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def pct_name(q: float) -> str:
    """50 -> ``median``; 99.9 -> ``p99_9`` (a key part: no dot)."""
    return "median" if q == 50 else "p" + f"{q:g}".replace(".", "_")


def pct_of(stat: str) -> float | None:
    """``median`` -> 50; ``p99_9`` -> 99.9; anything else (``mean``) None."""
    if stat == "median":
        return 50.0
    digits = stat[1:].replace("_", "")
    if stat.startswith("p") and digits.isdigit():
        return float(stat[1:].replace("_", "."))
    return None


class ServeRequest(BaseModel):
    """The fields of a request row its figures are derived from; the rest (client times,
    copied bytes, the pipeline stages' ``*_ms`` columns) are kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True)
    rate: str
    arm: str
    repeat: int = 0
    rid: int | str | None = None
    error: str | None = None
    status: int | None = None
    ttft_ms: float | None = None
    itl_ms: list[float] | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    prompt_image_tokens: int | None = None
    images: int | None = None
    pixels: int | None = None
    end_s: float | None = None
    batch_id: int | str | None = None
    producer_copied_bytes: int | None = None
    scheduler_copied_bytes: int | None = None

    @property
    def stage_ms(self) -> dict[str, Any]:
        """The pipeline stages' columns (every other ``*_ms`` one), in the row's order."""
        extra = self.model_extra or {}
        return {k: v for k, v in extra.items() if k.endswith("_ms") and k not in _NOT_STAGES}

    @property
    def served(self) -> bool:
        ok_status = self.status is None or 200 <= self.status < 300
        return self.error is None and self.ttft_ms is not None and ok_status

    @property
    def unit(self) -> str:
        """Its independent unit: its forward batch when the server reports one."""
        return f"{self.repeat}:{self.batch_id if self.batch_id is not None else f'r{self.rid}'}"

    def values(self, metric: str) -> list[float]:
        """A latency's finite values (ms): ITL's every gap, the others one value or none."""
        if metric == "itl":
            return [x for x in self.itl_ms or [] if math.isfinite(x)]
        v = finite(getattr(self, f"{metric}_ms"))
        return [] if v is None else [v]

    @property
    def own_tpot(self) -> float | None:
        """The TPOT its own E2E, TTFT and output tokens give (None with one token)."""
        e2e, ttft, n = finite(self.e2e_ms), finite(self.ttft_ms), self.output_tokens
        if e2e is None or ttft is None or n is None or n < 2:
            return None
        return (e2e - ttft) / (n - 1)

    def meets(self, slo: Mapping[str, float]) -> bool:
        """Served within every SLO (a missing TPOT meets a TPOT SLO)."""
        if not self.served:
            return False
        for key, limit in slo.items():
            v = finite(getattr(self, SLO_METRIC[key]))
            if v is None and key == "tpot":
                continue
            if v is None or v > limit:
                return False
        return True

    def unbilled(self, text_only: int | None) -> bool:
        """Served with images, yet its usage shows no image tokens: the server said 0, or
        billed no more prompt tokens than the prompt without images (``text_only``)."""
        if not self.served or not self.images:
            return False
        image, prompt = self.prompt_image_tokens, self.prompt_tokens
        return image == 0 or (
            image is None and prompt is not None and text_only is not None and prompt <= text_only
        )


class RateRow(BaseModel):
    """What the gate reads of a stated per-rate row where request rows cannot give it:
    throughput over the run's span (the trace start is not in the rows), and a summary-only
    import's counts (the peer tool's own; it wrote no request rows)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    rate: str
    arm: str
    completed: int | None = None
    failed: int | None = None
    req_per_s: float | None = None

    @field_validator("rate", "arm", mode="before")
    @classmethod
    def _label(cls, v: Any) -> str:
        return str(v)

    @property
    def throughput(self) -> list[float]:
        """Its throughput as one sample ([] when not stated or not finite)."""
        v = self.req_per_s
        return [v] if v is not None and math.isfinite(v) else []


def rate_rows(records: Any) -> dict[tuple[str, str], RateRow]:
    """A report's stated per-rate rows by (rate, arm), the first of each (ResultError names
    ``results[i].field``)."""
    out: dict[tuple[str, str], RateRow] = {}
    for r in typed_records(records, RateRow, "results"):
        out.setdefault((r.rate, r.arm), r)
    return out


def serve_requests(records: Any, where: str = "requests") -> list[ServeRequest]:
    """Request rows (dicts) as typed rows; ResultError names ``where[i].field``."""
    return typed_records(records, ServeRequest, where)


def readable_requests(records: Any) -> list[ServeRequest]:
    """The rows of ``records`` that read as request rows, the others left out (a page
    draws what it can of a hostile report)."""
    out = []
    for rec in records if isinstance(records, list) else []:
        try:
            out.append(ServeRequest.model_validate(rec))
        except ValidationError:
            continue
    return out


def bootstrap_interval(
    xs: Sequence[float], q: float, *, resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the q-th percentile of ``xs`` over single
    samples (seeded, so the same report always draws the same band); None below 3."""
    if len(xs) < 3:
        return None
    arr = np.asarray(xs, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arr), size=(resamples, len(arr)))
    stats = np.percentile(arr[idx], q, axis=1)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def samples(rows: Iterable[ServeRequest], metric: str) -> list[float]:
    """A latency's samples (ms) over the served rows; ITL: every gap of every request."""
    return [x for r in rows if r.served for x in r.values(metric)]


def _duration_s(rows: Sequence[ServeRequest]) -> float | None:
    """A repeat's duration: its last response's end from the trace start (None without
    client times: the in-process load generator records none)."""
    ends = [e for r in rows if (e := finite(r.end_s)) is not None]
    return max(ends) if ends and max(ends) > 0 else None


def repeat_throughputs(rows: Sequence[ServeRequest], slo: Mapping[str, float]) -> dict[str, float]:
    """One repeat's throughputs over its duration (none without one)."""
    dur = _duration_s(rows)
    if dur is None:
        return {}
    ok = [r for r in rows if r.served]
    out = {
        "output_tokens_per_s": sum(r.output_tokens or 0 for r in ok) / dur,
        "images_per_s_e2e": sum(r.images or 0 for r in ok) / dur,
        "megapixels_per_s": sum(r.pixels or 0 for r in ok) / dur / 1e6,
    }
    if slo:
        out[GOODPUT] = sum(1 for r in ok if r.meets(slo)) / dur
    return out
