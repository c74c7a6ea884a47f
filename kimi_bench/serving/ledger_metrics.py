"""The emulated pipeline's copy ledger (``kimi_bench.domain.ledger``) as Prometheus series, and
back: the emulator server counts bytes and operations per ledger entry and bytes per stage;
a client turns two ``/metrics`` scrapes into the ledger rows of what was served between."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import Counter, Histogram

from kimi_bench.domain.ledger import OPS, CopyRow
from kimi_bench.serving.metrics import MetricsSnapshot
from kimi_bench.serving.server_metrics import PREFIX, ServerMetrics

COPY_BYTES = f"{PREFIX}_pipeline_copy_bytes"
COPY_OPS = f"{PREFIX}_pipeline_copy_ops"
LABELS = ("stage", "op", "src", "dst", "mirrors")


def _copies(op: str) -> bool:
    return OPS.get(op, ("", True))[1]  # "map" moves no byte


class LedgerMetrics:
    """Series added to a server's registry: bytes and operations per ledger entry, bytes
    per stage (``ServerMetrics.stage_bytes``, actual copies only) and requests per step."""

    def __init__(self, metrics: ServerMetrics) -> None:
        r, self.metrics = metrics.registry, metrics
        self.bytes = Counter(COPY_BYTES, "Bytes per copy-ledger entry", LABELS, registry=r)
        self.ops = Counter(COPY_OPS, "Operations per copy-ledger entry", LABELS, registry=r)
        self.batch = Histogram(
            f"{PREFIX}_batch_requests",
            "Requests per scheduler step (continuous batching)",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self._last_step: Any = None

    def count(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """One rank's ledger rows of one step."""
        for row in rows:
            labels = [str(row[k]) for k in LABELS]
            self.bytes.labels(*labels).inc(row["bytes"])
            self.ops.labels(*labels).inc(row["count"])
            if _copies(row["op"]):
                self.metrics.stage_bytes.labels(row["stage"]).inc(row["bytes"])

    def step(self, step_id: Any, requests: int) -> None:
        """A request of scheduler step ``step_id`` (observed once per step)."""
        if step_id != self._last_step:
            self._last_step = step_id
            self.batch.observe(requests)


def copies_from_metrics(before: MetricsSnapshot, after: MetricsSnapshot) -> list[CopyRow]:
    """The copy ledger of what an emulator served between two ``/metrics`` scrapes, as
    ``Ledger.rows()`` rows (what ``serve-ab`` keeps as a run's ``copies``)."""
    rows: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    fields = {f"{COPY_BYTES}_total": "bytes", f"{COPY_OPS}_total": "count"}
    for (name, labels), value in after.values.items():
        if name not in fields:
            continue
        inc = value - before.values.get((name, labels), 0.0)
        row = rows.setdefault(labels, {**dict(labels), "bytes": 0, "count": 0})
        row[fields[name]] = round(value if inc < 0 else inc)  # < 0: the server restarted
    return [
        CopyRow(
            stage=r.get("stage", ""),
            op=r.get("op", ""),
            src=r.get("src", ""),
            dst=r.get("dst", ""),
            bytes=r["bytes"],
            count=r["count"],
            copies=_copies(r.get("op", "")),
            mirrors=r.get("mirrors", ""),
        )
        for r in rows.values()
        if r["count"] or r["bytes"]
    ]
