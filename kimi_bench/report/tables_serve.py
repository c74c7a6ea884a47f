"""The tables of a serve-ab report (``report.tables``), from one ``Serve``: what its tables
and its verdict read of ``report.json``, read once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kimi_bench.report import access
from kimi_bench.report.kinds import Compared, ServeReport
from kimi_bench.report.table import Column, Span, Table, pointer
from kimi_bench.report.tables_base import (
    BY_COUNT_COLUMNS,
    BY_SIZE_COLUMNS,
    COPY_COLUMNS,
    OVERHEAD_COLUMNS,
    SERVE_COLUMNS,
    Dict,
    col,
    present,
    rows_table,
)
from kimi_bench.results.serve import COMPARED, StatedComparison, StatedInterval

# ---------------------------------------------------------------------------- serve-ab

# median and p90 TTFT, throughput (over the run's span: the writer's), and the others when
# a report has them (ITL and TPOT need two tokens, goodput --goodput)
AB_METRICS = (*((c.key, c.label) for c in COMPARED[:2]), ("throughput", "throughput"))
AB_MORE = tuple((c.key, c.label) for c in COMPARED[2:])


@dataclass(frozen=True)
class Entry:
    """One A/B comparison: its rate, its key under ``ab[rate]`` (``deferred`` in an earlier
    one-arm report), its block's JSON pointer ("" when converted) and its metric blocks."""

    rate: str
    arm: str
    at: str
    blocks: dict[str, object]

    @cached_property
    def stated(self) -> dict[str, StatedComparison]:
        return {k: StatedComparison.read(v) for k, v in self.blocks.items() if isinstance(v, dict)}

    def metric(self, key: str) -> StatedComparison:
        return self.stated.get(key) or StatedComparison()

    def compared(self, key: str) -> Compared:
        """A metric's block as the verdict reads it."""
        block = self.blocks.get(key)
        return Compared.model_validate(block if isinstance(block, dict) else {})

    def name(self, base: str) -> str:
        """``deferred vs eager`` (``zero-copy_vs_deferred`` -> ``zero-copy vs deferred``)."""
        med = self.metric("median_ttft")
        if med.a_label and med.b_label:
            return f"{med.b_label} vs {med.a_label}"
        head, _, tail = self.arm.partition("_vs_")
        return f"{head} vs {tail or base}"


def _earlier(rate: str, metrics: Dict) -> Entry:
    """An earlier report's one-arm block (``ab[rate][metric]``: ``delta`` a fraction,
    ``ci95`` its interval) in the current shape; no pointer (the values are converted)."""
    out: Dict = {}
    for name, m in metrics.items():
        if not isinstance(m, dict):
            continue
        d, ci = access.number(m.get("delta")), m.get("ci95")
        ends = [access.number(x) for x in ci] if isinstance(ci, list) and len(ci) == 2 else []
        lo, hi = (ends[0], ends[1]) if len(ends) == 2 else (None, None)
        out[name] = {
            "delta_pct": None if d is None else d * 100,
            "interval": (
                {"low": lo * 100, "high": hi * 100, "kind": "ci"}
                if lo is not None and hi is not None
                else {}
            ),
            "significant": m.get("significant"),
            "verdict": m.get("method"),
        }
    return Entry(rate, "deferred", "", out)


@dataclass(frozen=True)
class Serve:
    """What a serve-ab report's tables and verdict read: its model and its dict, whose
    stored rows the tables show as written, with their JSON pointers (free-form)."""

    typed: ServeReport
    data: Dict

    @cached_property
    def base(self) -> str:
        return access.base_arm(self.data)

    @cached_property
    def entries(self) -> list[Entry]:
        """The A/B comparisons in report order (an earlier layout converted)."""
        out = []
        for rate, per_arm in (self.data.get("ab") or {}).items():
            blocks = per_arm if isinstance(per_arm, dict) else {}
            if any(isinstance(v, dict) and "delta" in v for v in blocks.values()):
                out.append(_earlier(str(rate), blocks))
                continue
            for arm, metrics in blocks.items():
                if isinstance(metrics, dict):
                    out.append(Entry(str(rate), str(arm), pointer("ab", rate, arm), metrics))
        return out

    def rows(self, block: str) -> Any:
        return self.data.get(block)


def serve_per_rate(s: Serve) -> Table:
    rows = [r for r in s.rows("results") or [] if isinstance(r, dict)]
    table = rows_table(
        "serve.per_rate", "Per rate and arm", rows, "/results", present(rows, SERVE_COLUMNS)
    )
    # TTFT's independent units: forward batches, or requests where the server reports none
    if rows and all(r.get("units") == "requests" for r in rows):
        table.columns = [Column(c.key, "requests", c.fmt, c.fold)
                         if c.key == "forward_batches" else c for c in table.columns]  # fmt: skip
    return table


def serve_ab(s: Serve) -> Table:
    base, cols = s.base, [col("rate"), col("comparison")]
    shown = AB_METRICS + tuple((k, n) for k, n in AB_MORE if any(k in e.stated for e in s.entries))
    for key, label in shown:
        cols += [
            col(f"{key}_delta", "pct", f"{label} Δ"),
            col(f"{key}_interval", "span", "interval"),
        ]
    cols.append(col("median_ttft_verdict", "text", "median TTFT verdict"))
    table = Table("serve.ab", f"A/B (each arm vs {base}; signed %, arm minus {base})", cols)
    for e in s.entries:
        at, src = e.at, dict[str, Any]()
        row: dict[str, Any] = {"rate": e.rate, "comparison": e.name(base)}
        for key, _label in shown:
            m = e.metric(key)
            iv = m.interval or StatedInterval()
            row[f"{key}_delta"] = m.delta_pct
            row[f"{key}_interval"] = Span(iv.low, iv.high, iv.kind or "none", "pct")
            if at:
                src[f"{key}_delta"] = f"{at}/{key}/delta_pct"
                src[f"{key}_interval"] = (f"{at}/{key}/interval/low", f"{at}/{key}/interval/high")
        row["median_ttft_verdict"] = e.metric("median_ttft").verdict
        if at:
            src["median_ttft_verdict"] = f"{at}/median_ttft/verdict"
        table.add(row, src)
    return table


# The blocks of rows a page shows as report.json holds them: (table key, title, block,
# columns); capacity comes first, the others after the A/B table.
CAPACITY = ("serve.capacity", "Capacity (highest rate meeting the --goodput SLOs; the next "
            "rate tried did not)", "capacity_rows", ("arm", "capacity_req_per_s",
            "achieved_req_per_s", "next_rate_failed", "status", "probes", "gain_pct"))  # fmt: skip
AFTER_AB = (
    ("serve.by_size", "By image size (longest side; TTFT of the requests whose largest image "
     "is in the bucket)", "by_size", BY_SIZE_COLUMNS),
    ("serve.by_count", "By images per request (mixed: some images deferred, others not)",
     "by_images_per_request", BY_COUNT_COLUMNS),
    ("serve.copies", "Copies (ledger of the measured requests, per rate and arm)", "copies",
     ("rate", "arm", *COPY_COLUMNS)),
    ("serve.overhead", "Client overhead (client minus server mean TTFT; send lateness)",
     "client_overhead", OVERHEAD_COLUMNS),
)  # fmt: skip


def stored(s: Serve, key: str, title: str, at: str, cols: tuple[str, ...]) -> Table | None:
    """The rows of block ``at`` as written (None when the report has none)."""
    rows = s.rows(at)
    return rows_table(key, title, rows, f"/{at}", list(cols)) if rows else None


def serve_tables(s: Serve) -> list[Table]:
    out = [
        stored(s, *CAPACITY),
        serve_per_rate(s),
        serve_ab(s) if s.typed.ab else None,
        *(stored(s, *block) for block in AFTER_AB),
    ]
    return [t for t in out if t is not None]
