"""What the client records: one RequestRecord per request, an ArmResult per endpoint and
trace, and the ServerInfo read from an endpoint. Times are seconds from the trace start
(the first arrival offset is measured from it), on ``time.perf_counter``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TypedDict, cast

ERROR_KINDS = {
    "connect": "the connection could not be made (refused, unreachable, connect timeout)",
    "http": "the server answered with an HTTP 4xx/5xx status",
    "timeout": "no complete response within the per-request timeout (a stalled server)",
    "no_token": "the stream ended without a generated token",
    "truncated": "the stream ended (or broke) after tokens but before a finish_reason or [DONE]",
    "malformed": "the response is not a well-formed OpenAI event stream",
    "server_error": "the stream carried an error object",
    "read": "the connection broke while the response was read",
    "cancelled": "the request was in flight when the arm ended (dead endpoint, Ctrl-C)",
    "client_error": "an unexpected client-side exception (named in the error text)",
}


class ServerReport(TypedDict, total=False):
    """The emulator's ``X-Kimi-Bench-Request`` header (``backend.REQUEST_HEADER``): its
    stage seconds and the request's facts (``engine.serve_records.REPORTED``), as read from
    JSON: each field is checked where it is used (``bench.serve_runs.from_client``)."""

    stages_s: dict[str, float]
    image_tokens: int
    patches: int
    feature_bytes: int
    deferred_images: int
    image_decisions: list[list[int]]  # per image: [deferred, raw bytes, FP32 bytes, encoded]
    producer_copied_bytes: int
    scheduler_copied_bytes: int
    batch_requests: int
    batch_id: int
    worker: int
    recipe: dict[str, list[str]]
    decodes: list[list[str]]  # [decoder, why] per image
    arm: str
    batch: int  # the forward step's id


class RequestRecordDoc(TypedDict):
    """``RequestRecord.to_dict``: its fields, then ok and the derived times."""

    rid: int
    scheduled_s: float
    warmup: bool
    sent_s: float | None
    wire_sent_s: float | None
    gate_wait_s: float
    first_byte_s: float | None
    first_chunk_s: float | None
    first_token_s: float | None
    done_s: float | None
    status: int | None
    output_tokens: int
    bytes_received: int
    token_chunks: int
    finish_reason: str | None
    done_marker: bool
    retries: int
    prompt_tokens: int | None
    prompt_image_tokens: int | None
    itl_ms: list[float]
    server: ServerReport | None
    error_kind: str | None
    error: str | None
    ok: bool
    ttft_ms: float | None
    e2e_ms: float | None
    queue_ms: float | None
    lateness_ms: float | None


@dataclass
class RequestRecord:
    rid: int
    scheduled_s: float  # arrival offset from the trace
    warmup: bool = False
    sent_s: float | None = None  # when the request left, after the concurrency gate
    # when its headers started out on a connection (after any connect), as httpcore
    # reports it; None when the transport does not report (then sent_s stands in)
    wire_sent_s: float | None = None
    gate_wait_s: float = 0.0  # time waiting for a max_concurrency slot (a planned wait)
    first_byte_s: float | None = None  # when the response headers arrived
    # the first chunk with a choices list, text or not (a role-only opening chunk counts):
    # where vllm bench serve starts TTFT; kimi-bench and sglang.bench_serving start it at
    # the first chunk with text (first_token_s)
    first_chunk_s: float | None = None
    first_token_s: float | None = None
    done_s: float | None = None  # end of stream, or the failure
    status: int | None = None
    output_tokens: int = 0
    bytes_received: int = 0  # response body bytes (as sent, before decompression)
    token_chunks: int = 0  # chunks that carried generated text
    finish_reason: str | None = None  # the first finish_reason of the stream
    done_marker: bool = False  # the stream ended with data: [DONE]
    retries: int = 0  # 429 answers retried (--retry-429)
    prompt_tokens: int | None = None  # usage.prompt_tokens, when the server reports usage
    prompt_image_tokens: int | None = None  # usage.prompt_tokens_details.image_tokens, if given
    itl_ms: list[float] = field(default_factory=list)  # between content-bearing chunks
    server: ServerReport | None = None  # the X-Kimi-Bench-Request header (stages, facts)
    error_kind: str | None = None  # a key of ERROR_KINDS
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None and self.first_token_s is not None

    @property
    def ttft_ms(self) -> float | None:
        if not self.ok or self.sent_s is None or self.first_token_s is None:
            return None
        return (self.first_token_s - self.sent_s) * 1e3

    @property
    def e2e_ms(self) -> float | None:
        if self.sent_s is None or self.done_s is None:
            return None
        return (self.done_s - self.sent_s) * 1e3

    @property
    def queue_ms(self) -> float | None:
        """Time spent waiting for a ``max_concurrency`` slot (client side)."""
        return None if self.sent_s is None else (self.sent_s - self.scheduled_s) * 1e3

    @property
    def lateness_ms(self) -> float | None:
        """How late the send was: actual send minus scheduled, less the concurrency wait
        (a wait the run asked for). What the client's loop and HTTP library cost."""
        sent = self.wire_sent_s if self.wire_sent_s is not None else self.sent_s
        if sent is None:
            return None
        return (sent - self.scheduled_s - self.gate_wait_s) * 1e3

    def fail(self, kind: str, message: str) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.error_kind, self.error = kind, message

    def to_dict(self) -> RequestRecordDoc:
        d = asdict(self)
        d.update(ok=self.ok, ttft_ms=self.ttft_ms, e2e_ms=self.e2e_ms, queue_ms=self.queue_ms,
                 lateness_ms=self.lateness_ms)  # fmt: skip
        return cast(RequestRecordDoc, d)  # asdict: the fields by name


class ArmResultDoc(TypedDict):
    """``ArmResult.to_dict``."""

    base_url: str
    planned: int
    completed: int
    failed: int
    unsent: int
    error: str | None
    trace_start: float | None
    records: list[RequestRecordDoc]
    warmup: list[RequestRecordDoc]


@dataclass
class ArmResult:
    """One trace sent to one endpoint. ``error`` says why the arm ended early (a dead
    endpoint, Ctrl-C); the records up to that point are kept."""

    base_url: str
    planned: int
    records: list[RequestRecord] = field(default_factory=list)
    warmup: list[RequestRecord] = field(default_factory=list)
    trace_start: float | None = None  # time.perf_counter() at offset 0
    error: str | None = None

    @property
    def completed(self) -> int:
        return sum(r.ok for r in self.records)

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.records)

    @property
    def unsent(self) -> int:
        return self.planned - len(self.records)

    def to_dict(self) -> ArmResultDoc:
        return {
            "base_url": self.base_url,
            "planned": self.planned,
            "completed": self.completed,
            "failed": self.failed,
            "unsent": self.unsent,
            "error": self.error,
            "trace_start": self.trace_start,
            "records": [r.to_dict() for r in self.records],
            "warmup": [r.to_dict() for r in self.warmup],
        }


Scalar = str | int | float | bool  # a JSON scalar


class ServerInfoDoc(TypedDict):
    """``ServerInfo.to_dict``: its fields, then ``model``."""

    base_url: str
    models: list[dict[str, Scalar]]
    version: str | None
    version_source: str | None
    server_header: str | None
    error: str | None
    model: str | None


@dataclass
class ServerInfo:
    """What an endpoint says about itself. ``version`` comes from the first of
    ``GET /version`` (vLLM, this emulator), ``GET /get_server_info`` (SGLang) or the
    ``Server`` header that names one; ``version_source`` says which."""

    base_url: str
    models: list[dict[str, Scalar]] = field(default_factory=list)  # scalar fields of /v1/models
    version: str | None = None
    version_source: str | None = None
    server_header: str | None = None
    error: str | None = None

    @property
    def model(self) -> str | None:
        return str(self.models[0]["id"]) if self.models and "id" in self.models[0] else None

    def to_dict(self) -> ServerInfoDoc:
        return {
            "base_url": self.base_url,
            "models": [dict(m) for m in self.models],
            "version": self.version,
            "version_source": self.version_source,
            "server_header": self.server_header,
            "error": self.error,
            "model": self.model,
        }
