"""The server's Prometheus metrics (prometheus_client), one registry per app so several
servers can live in one process."""

from __future__ import annotations

import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from kimi_bench.serving.backend import FirstToken
from kimi_bench.serving.intake import REASONS

PREFIX = "kimi_bench"
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
# ok; error (the backend failed it, or its stream ended without a token); cancelled (the
# server stopped it); disconnected (the client went away first); bad_request and
# unauthorized (refused before the backend, see kimi_bench_refused_requests_total)
OUTCOMES = ("ok", "error", "cancelled", "disconnected", "bad_request", "unauthorized")
_ADMITTED = ("ok", "error", "cancelled", "disconnected")


class ServerMetrics:
    """Requests by outcome, refusals by reason, TTFT and end-to-end latency, per-stage
    time and bytes, tokens."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r, p = self.registry, PREFIX
        self.requests = Counter(f"{p}_requests", "Finished requests", ["outcome"], registry=r)
        self.refused = Counter(
            f"{p}_refused_requests",
            "Requests refused before the backend, by reason",
            ["reason"],
            registry=r,
        )
        self.running = Gauge(f"{p}_requests_running", "Requests in the backend", registry=r)
        self.ttft = Histogram(
            f"{p}_time_to_first_token_seconds",
            "Request received to first token ready",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            f"{p}_e2e_request_latency_seconds",
            "Request received to response end",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            f"{p}_stage_seconds",
            "Backend time per pipeline stage",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_bytes = Counter(
            f"{p}_stage_bytes", "Bytes moved per pipeline stage", ["stage"], registry=r
        )
        self.image_bytes = Counter(
            f"{p}_request_image_bytes", "Encoded image bytes received", registry=r
        )
        self.prompt_tokens = Counter(f"{p}_prompt_tokens", "Prompt tokens", registry=r)
        self.generation_tokens = Counter(
            f"{p}_generation_tokens", "Generated tokens streamed", registry=r
        )
        for outcome in OUTCOMES:  # export every outcome and reason from zero
            self.requests.labels(outcome)
        for reason in REASONS:
            self.refused.labels(reason)

    def received(self, image_bytes: int) -> None:
        self.image_bytes.inc(image_bytes)
        self.running.inc()

    def first_token(self, first: FirstToken, t0: float) -> None:
        self.ttft.observe(time.perf_counter() - t0)
        for stage, seconds in first.stages_s.items():
            self.stage.labels(stage).observe(seconds)
        for stage, n in first.stage_bytes.items():
            self.stage_bytes.labels(stage).inc(n)

    def refuse(self, reason: str, outcome: str = "bad_request") -> None:
        """A request refused before it reached the backend."""
        self.refused.labels(reason).inc()
        self.requests.labels(outcome).inc()

    def finish(
        self, outcome: str, t0: float, tokens: int = 0, prompt: int = 0, *, admitted: bool = True
    ) -> None:
        """A request ended; requests that reached the backend (``admitted``) leave
        ``running``."""
        self.requests.labels(outcome).inc()
        if admitted and outcome in _ADMITTED:
            self.running.dec()
        if outcome == "ok":
            self.e2e.observe(time.perf_counter() - t0)
            self.generation_tokens.inc(tokens)
            self.prompt_tokens.inc(prompt)

    def outcome_counts(self) -> dict[str, int]:
        """Finished requests by outcome, those with at least one."""
        counts = {
            o: self.registry.get_sample_value(f"{PREFIX}_requests_total", {"outcome": o})
            for o in OUTCOMES
        }
        return {o: int(n) for o, n in counts.items() if n}

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
