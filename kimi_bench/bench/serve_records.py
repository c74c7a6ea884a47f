"""serve-ab's request records from the HTTP client's: client times (scheduled, sent, first
byte, first token, end; the send's lateness) and, when the emulator reported them, the
server's pipeline stages placed back from the first token."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kimi_bench.serving.emulator import REPORTED
from kimi_bench.serving.emulator import STAGES as SERVER_STAGES
from kimi_bench.serving.records import RequestRecord

# per-request facts the emulator reports (its recipe trail and decodes are kept apart)
_APART = ("recipe", "decodes")
_FACTS = (*(k for k in REPORTED if k not in _APART), "batch")


def http_record(rec: RequestRecord, t0: float) -> dict[str, Any]:
    """One client record in serve-ab's request-record shape: absolute ``t_sent`` and
    ``t_first`` (client perf_counter), ``ttft_ms``; ``error``/``error_kind`` only on a
    failure. When the server reported its stages (the emulator does), ``stages_ms`` holds
    them with ``http_ms`` (the rest of the client's TTFT: HTTP both ways, the server's
    parsing) and the pipeline bounds ``t_start``..``t_step`` are placed back from
    ``t_first``, so ``queue_wait`` (``t_sent`` -> ``t_start``) includes ``http_ms`` and
    the server's ``respond`` stage."""
    out: dict[str, Any] = {
        "rid": rec.rid,
        "warm": False,
        "scheduled_s": rec.scheduled_s,
        "status": rec.status,
        "output_tokens": rec.output_tokens,
        "prompt_tokens": rec.prompt_tokens,
        "itl_ms": rec.itl_ms,
        "e2e_ms": rec.e2e_ms,
        "client_wait_ms": rec.queue_ms,
        "lateness_ms": rec.lateness_ms,  # actual send - scheduled, less the concurrency wait
        "bytes_received": rec.bytes_received,
        "token_chunks": rec.token_chunks,
        "finish_reason": rec.finish_reason,
        "done_marker": rec.done_marker,
        "retries": rec.retries,
    }
    # every time on the client clock (perf_counter) and as seconds from the trace start
    out["times_s"] = {
        "scheduled": rec.scheduled_s,
        "sent": rec.sent_s,
        "wire_sent": rec.wire_sent_s,
        "first_byte": rec.first_byte_s,
        "first_token": rec.first_token_s,
        "end": rec.done_s,
    }
    if rec.sent_s is not None:
        out["t_sent"] = t0 + rec.sent_s
    if rec.done_s is not None:
        out["t_end"] = t0 + rec.done_s
    if not rec.ok or rec.first_token_s is None:
        out.update(error=rec.error or "failed", error_kind=rec.error_kind)
        return out
    out.update(t_first=t0 + rec.first_token_s, ttft_ms=rec.ttft_ms)
    server = rec.server or {}
    out.update({k: server[k] for k in _FACTS if k in server})
    if isinstance(server.get("recipe"), dict):
        out["recipe"] = server["recipe"]
    if isinstance(server.get("decodes"), list):
        out["decodes"] = [tuple(map(str, d)) for d in server["decodes"] if isinstance(d, list)]
    stages = server.get("stages_s")
    if isinstance(stages, dict) and all(isinstance(stages.get(k), float) for k in SERVER_STAGES):
        _place_stages(out, {k: stages[k] for k in SERVER_STAGES})
    return out


def _place_stages(out: dict[str, Any], s: Mapping[str, float]) -> None:
    ms = {k: v * 1e3 for k, v in s.items()}
    ms["http"] = max(0.0, out["ttft_ms"] - sum(ms.values()))
    out["stages_ms"] = ms
    t = out["t_first"] - s["step"]
    out["t_step"] = t
    out["t_recv"] = t = t - s["sched_wait"]
    out["t_produced"] = t = t - s["to_scheduler"]
    out["t_start"] = t - s["producer"] - s["decode"]
