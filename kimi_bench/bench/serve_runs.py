"""What serve-ab keeps of what it ran, typed: one :class:`ServedRequest` per measured
request and one :class:`ServeRun` per (rate, repeat, arm), from the HTTP client's records
(``from_client``) or the in-process pipeline's (``from_pipeline``, torchrun's path). The
report is written from these (``serve_report.request_rows``); nothing is grown key by key.

Times: ``t_*`` are absolute ``time.perf_counter`` seconds (the client's clock, which is
the pipeline's on one host); ``times_s`` are seconds from the trace start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kimi_bench.domain.ledger import CopyRow
from kimi_bench.engine.serve_records import REPORTED
from kimi_bench.engine.serve_records import STAGES as SERVER_STAGES
from kimi_bench.serving.metrics import MetricsDoc
from kimi_bench.serving.records import RequestRecord

# per-request facts a pipeline reports (its recipe trail and decodes are kept apart)
_APART = ("recipe", "decodes")
FACTS = (*(k for k in REPORTED if k not in _APART), "batch")
# the pipeline's bounds, in order (the report's stages are the gaps between them)
BOUNDS = ("t_sent", "t_start", "t_produced", "t_recv", "t_step", "t_first")


@dataclass(frozen=True)
class RequestImages:
    """What a request carried: its images, their pixels and their encoded bytes; each
    image's (width, height, encoded bytes) in request order."""

    count: int = 0
    pixels: int = 0
    encoded_bytes: int = 0
    sizes: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class ClientSide:
    """What only the HTTP client sees of a request."""

    bytes_received: int = 0
    token_chunks: int = 0
    finish_reason: str | None = None
    done_marker: bool = False
    retries: int = 0
    lateness_ms: float | None = None  # actual send - scheduled, less the concurrency wait
    prompt_image_tokens: int | None = None  # usage.prompt_tokens_details.image_tokens
    # scheduled, sent, wire_sent, first_byte, first_chunk, first_token, end: seconds from
    # the trace start
    times_s: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class ServedRequest:
    """One measured request: its times, tokens and images; what the server reported of
    it (``facts``, the pipeline's ``bounds`` and ``stages_ms``); ``error`` on a failure."""

    rid: int
    scheduled_s: float | None = None
    status: int | None = None
    error: str | None = None
    error_kind: str | None = None
    t_sent: float | None = None
    t_first: float | None = None
    ttft_ms: float | None = None
    itl_ms: tuple[float, ...] = ()
    e2e_ms: float | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    images: RequestImages = RequestImages()
    max_tokens: int | None = None  # what the request asked for (None: not known)
    worker: int | None = None
    client: ClientSide | None = None  # None: the in-process load generator
    facts: Mapping[str, Any] = field(default_factory=dict)
    bounds: Mapping[str, float] = field(default_factory=dict)
    stages_ms: Mapping[str, float] | None = None
    recipe: Mapping[str, list[str]] | None = None  # pipeline.recipe_record
    decodes: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.t_first is not None

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first, as sglang.bench_serving and vllm bench
        serve compute it: (E2E - TTFT) / (output tokens - 1); None with one token."""
        if not self.ok or self.e2e_ms is None or self.ttft_ms is None:
            return None
        n = self.output_tokens or 0
        return (self.e2e_ms - self.ttft_ms) / (n - 1) if n > 1 else None


@dataclass(frozen=True)
class Placement:
    """Where a run sits in the plan: its rate, repeat and the trace's arrival offsets."""

    rate: float
    rate_label: str
    repeat: int
    rate_index: int
    arrivals: tuple[float, ...]


@dataclass
class ServeRun:
    """One arm through one trace. ``error`` says why it ended early (the records up to
    then are kept); ``source`` what served it; ``copies`` the copy ledger of an emulated
    arm; ``leftover_segments`` is set once its server (or pipeline) has stopped."""

    arm: str
    at: Placement
    records: list[ServedRequest] = field(default_factory=list)
    trace_start: float | None = None
    error: str | None = None
    source: dict[str, Any] | None = None
    server_metrics: MetricsDoc | None = None
    server_metrics_error: str | None = None
    copies: list[CopyRow] | None = None
    arena: list[dict[str, Any]] = field(default_factory=list)
    unsent: int = 0
    leftover_segments: int = 0

    @property
    def rate_label(self) -> str:
        return self.at.rate_label

    @property
    def repeat(self) -> int:
        return self.at.repeat

    @property
    def http(self) -> bool:
        """Measured by the HTTP client (its records carry client-side times)."""
        return any(r.client is not None for r in self.records)


# ------------------------------------------------------------------------ from records


def from_client(
    rec: RequestRecord, t0: float, images: RequestImages, max_tokens: int | None = None
) -> ServedRequest:
    """One client record: absolute times from the trace start ``t0``; when the server
    reported its stages (the emulator does), its pipeline bounds are placed back from
    the first token (``_placed``)."""
    client = ClientSide(
        bytes_received=rec.bytes_received, token_chunks=rec.token_chunks,
        finish_reason=rec.finish_reason, done_marker=rec.done_marker, retries=rec.retries,
        lateness_ms=rec.lateness_ms,
        prompt_image_tokens=rec.prompt_image_tokens,
        times_s={"scheduled": rec.scheduled_s, "sent": rec.sent_s, "wire_sent": rec.wire_sent_s,
                 "first_byte": rec.first_byte_s, "first_chunk": rec.first_chunk_s,
                 "first_token": rec.first_token_s,
                 "end": rec.done_s},
    )  # fmt: skip
    base: dict[str, Any] = {
        "rid": rec.rid, "scheduled_s": rec.scheduled_s, "status": rec.status,
        "t_sent": None if rec.sent_s is None else t0 + rec.sent_s,
        "output_tokens": rec.output_tokens, "prompt_tokens": rec.prompt_tokens,
        "images": images, "client": client, "itl_ms": tuple(rec.itl_ms),
        "max_tokens": max_tokens,
    }  # fmt: skip
    if not rec.ok or rec.first_token_s is None:
        return ServedRequest(**base, error=rec.error or "failed", error_kind=rec.error_kind)
    ttft = rec.ttft_ms
    assert ttft is not None
    t_first = t0 + rec.first_token_s
    server: Mapping[str, Any] = rec.server or {}  # the header's JSON, checked field by field
    facts = {k: server[k] for k in FACTS if k in server}
    stages = server.get("stages_s")
    bounds: dict[str, float] = {}
    stages_ms: dict[str, float] | None = None
    if isinstance(stages, dict) and all(isinstance(stages.get(k), float) for k in SERVER_STAGES):
        bounds, stages_ms = _placed(t_first, ttft, {k: stages[k] for k in SERVER_STAGES})
    recipe = server.get("recipe") if isinstance(server.get("recipe"), dict) else None
    decodes: list[Any] = server["decodes"] if isinstance(server.get("decodes"), list) else []
    return ServedRequest(
        **base, t_first=t_first, ttft_ms=ttft, e2e_ms=rec.e2e_ms,
        worker=server.get("worker") if isinstance(server.get("worker"), int) else None,
        facts=facts, bounds=bounds, stages_ms=stages_ms, recipe=recipe,
        decodes=tuple((str(d[0]), str(d[1])) for d in decodes if len(d) == 2),
    )  # fmt: skip


def _placed(
    t_first: float, ttft_ms: float, s: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """The server's stages (seconds) as pipeline bounds on the client's clock, placed back
    from the first token, and in ms with ``http`` (the rest of the client's TTFT: HTTP
    both ways, the server's parsing), so ``queue_wait`` (``t_sent`` -> ``t_start``)
    includes ``http`` and the server's ``respond`` stage."""
    ms = {k: v * 1e3 for k, v in s.items()}
    ms["http"] = max(0.0, ttft_ms - sum(ms.values()))
    t_step = t_first - s["step"]
    t_recv = t_step - s["sched_wait"]
    t_produced = t_recv - s["to_scheduler"]
    t_start = t_produced - s["producer"] - s["decode"]
    return {"t_start": t_start, "t_produced": t_produced, "t_recv": t_recv,
            "t_step": t_step}, ms  # fmt: skip


def from_pipeline(payload: Mapping[str, Any], images: RequestImages) -> ServedRequest:
    """A request record of the in-process pipeline (``engine.serve_workers``): the
    bounds it stamped, its facts; no client side (the load generator's queue is the
    client). Its first token ends it (the in-process pipeline has no stream)."""
    bounds = {k: float(payload[k]) for k in BOUNDS[1:-1] if k in payload}
    facts = {k: payload[k] for k in FACTS if k in payload}
    base: dict[str, Any] = {
        "rid": int(payload["rid"]), "t_sent": payload.get("t_sent"), "images": images,
        "worker": payload.get("worker"), "facts": facts, "bounds": bounds,
        "status": payload.get("status"),
    }  # fmt: skip
    if "error" in payload or "t_first" not in payload:
        return ServedRequest(**base, error=str(payload.get("error") or "failed"))
    t_first = float(payload["t_first"])
    ttft = (t_first - float(payload["t_sent"])) * 1e3
    recipe = payload.get("recipe")
    return ServedRequest(
        **base, t_first=t_first, ttft_ms=ttft, e2e_ms=ttft, output_tokens=1,
        recipe=recipe if isinstance(recipe, dict) else None,
        decodes=tuple((str(d[0]), str(d[1])) for d in payload.get("decodes") or ()),
    )  # fmt: skip


def request_images(sizes: Sequence[tuple[int, int, int]]) -> RequestImages:
    """(width, height, encoded bytes) of each image of a request."""
    return RequestImages(
        len(sizes), sum(w * h for w, h, _ in sizes), sum(b for *_, b in sizes), tuple(sizes)
    )


class ServeFailed(RuntimeError):
    def __init__(self, message: str, runs: list[ServeRun]) -> None:
        super().__init__(message)
        self.runs = runs
