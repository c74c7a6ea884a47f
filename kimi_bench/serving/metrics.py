"""Prometheus ``/metrics`` of an endpoint: scrape before and after a phase, keep what the
phase added to its counters and histograms. The text format is parsed by
``prometheus_client.parser``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypedDict

import httpx
from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]

_COUNTER_TYPES = ("counter",)
_HISTOGRAM_TYPES = ("histogram",)
_SUMMARY_TYPES = ("summary",)
_UNTYPED = ("unknown", "untyped")  # by convention, a *_total sample of these is a counter


class MetricsError(RuntimeError):
    """The endpoint has no usable ``/metrics``; the message says why."""


def series_name(name: str, labels: Labels) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{inner}}}" if labels else name


@dataclass(frozen=True)
class MetricsSnapshot:
    """Sample values of one scrape. ``role`` per sample name: ``counter``, ``bucket``,
    ``sum`` or ``count`` (of a histogram or summary) or ``gauge`` (anything else);
    ``family`` maps histogram sample names to their family."""

    values: dict[SeriesKey, float]
    role: dict[str, str]
    family: dict[str, str]


def parse_metrics(text: str) -> MetricsSnapshot:
    """Prometheus text exposition -> snapshot. ``*_created`` timestamps are dropped;
    an untyped ``*_total`` sample is taken as a counter (the naming convention)."""
    values: dict[SeriesKey, float] = {}
    role: dict[str, str] = {}
    family: dict[str, str] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsError(f"/metrics is not Prometheus text format: {exc}") from None
    for fam in families:
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            suffix = s.name[len(fam.name) :]
            if fam.type in _COUNTER_TYPES or (fam.type in _UNTYPED and s.name.endswith("_total")):
                role[s.name] = "counter"
            elif fam.type in _HISTOGRAM_TYPES + _SUMMARY_TYPES and suffix in (
                "_bucket",
                "_sum",
                "_count",
            ):
                role[s.name] = suffix[1:]
                family[s.name] = fam.name
            else:
                role[s.name] = "gauge"
            values[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return MetricsSnapshot(values, role, family)


def scrape_metrics(
    base_url: str, *, timeout_s: float = 10.0, headers: dict[str, str] | None = None
) -> MetricsSnapshot:
    """``GET {base_url}/metrics``; MetricsError when it cannot be read or parsed."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        r = httpx.get(url, timeout=timeout_s, headers=headers, trust_env=False)
    except httpx.HTTPError as exc:
        raise MetricsError(f"cannot read {url}: {exc}") from None
    if r.status_code != 200:
        raise MetricsError(f"{url} answered HTTP {r.status_code} (metrics not enabled?)")
    return parse_metrics(r.text)


class MetricsScrapes:
    """The ``/metrics`` scrapes around one trace: ``before`` (taken after the warm-up
    requests, ``take_before``), then ``scrape()`` after it; a failed scrape is None, and
    ``error`` says why."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self.before: MetricsSnapshot | None = None
        self.error: str | None = None

    def scrape(self) -> MetricsSnapshot | None:
        try:
            return scrape_metrics(self.url, headers=self.headers)
        except MetricsError as exc:
            self.error = str(exc)
            return None

    def take_before(self) -> None:
        self.before = self.scrape()


class HistogramDoc(TypedDict):
    """``HistogramDelta.to_dict``: [bound ("+Inf" for the last), count] per bucket."""

    buckets: list[list[float | str]]
    sum: float
    count: float


class MetricsDoc(TypedDict):
    """``MetricsDelta.to_dict`` (a serve-ab run's ``server_metrics``)."""

    counters: dict[str, float]
    histograms: dict[str, HistogramDoc]
    gauges: dict[str, dict[str, float | None]]  # series -> {"before": v, "after": v}
    resets: list[str]


@dataclass
class HistogramDelta:
    """Observations a histogram gained: cumulative ``buckets`` as (upper bound, count)
    sorted by bound (``inf`` last), their ``sum`` and ``count``."""

    buckets: list[tuple[float, float]] = field(default_factory=list)
    sum: float = 0.0
    count: float = 0.0

    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """Estimate by linear interpolation inside the bucket that holds rank ``q*count``
        (as PromQL's ``histogram_quantile``); None without observations."""
        if not 0 <= q <= 1:
            raise ValueError("q must be in [0, 1]")
        total = self.buckets[-1][1] if self.buckets else 0.0
        if total <= 0:
            return None
        rank, lower, below = q * total, 0.0, 0.0
        for bound, cum in self.buckets:
            if cum >= rank:
                if math.isinf(bound):
                    return lower
                inside = cum - below
                return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
            lower, below = bound, cum
        return lower

    def to_dict(self) -> HistogramDoc:
        return {
            "buckets": [["+Inf" if math.isinf(b) else b, c] for b, c in self.buckets],
            "sum": self.sum,
            "count": self.count,
        }


@dataclass
class MetricsDelta:
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, HistogramDelta] = field(default_factory=dict)
    gauges: dict[str, dict[str, float | None]] = field(default_factory=dict)
    resets: list[str] = field(default_factory=list)  # series that went down (restarts)

    def to_dict(self) -> MetricsDoc:
        return {
            "counters": dict(self.counters),
            "histograms": {k: h.to_dict() for k, h in self.histograms.items()},
            "gauges": dict(self.gauges),
            "resets": list(self.resets),
        }


def _increase(before: float | None, after: float) -> tuple[float, bool]:
    """A counter's increase; a value that went down was reset, so all of it is new."""
    if before is None:
        return after, False
    return (after, True) if after < before else (after - before, False)


def metrics_delta(before: MetricsSnapshot, after: MetricsSnapshot) -> MetricsDelta:
    """What happened between two scrapes. Series new in ``after`` count from zero; series
    gone from ``after`` are dropped; gauges are kept as before/after values."""
    out = MetricsDelta()
    for (name, labels), value in after.values.items():
        role = after.role.get(name, "gauge")
        old = before.values.get((name, labels))
        if role == "gauge":
            out.gauges[series_name(name, labels)] = {"before": old, "after": value}
            continue
        inc, reset = _increase(old, value)
        if reset:
            out.resets.append(series_name(name, labels))
        fam = after.family.get(name)
        if role == "counter" or fam is None:
            out.counters[series_name(name, labels)] = inc
            continue
        le = dict(labels).get("le") if role == "bucket" else None
        key = series_name(fam, tuple((k, v) for k, v in labels if k != "le"))
        hist = out.histograms.setdefault(key, HistogramDelta())
        if role == "bucket" and le is not None:
            hist.buckets.append((float(le), inc))
        elif role == "sum":
            hist.sum = inc
        elif role == "count":
            hist.count = inc
    for hist in out.histograms.values():
        hist.buckets.sort()
    # summaries have no buckets: report their sum/count as counters instead
    for key in [k for k, h in out.histograms.items() if not h.buckets]:
        h = out.histograms.pop(key)
        base, _, rest = key.partition("{")
        tail = "{" + rest if rest else ""
        out.counters[f"{base}_sum{tail}"] = h.sum
        out.counters[f"{base}_count{tail}"] = h.count
    return out
