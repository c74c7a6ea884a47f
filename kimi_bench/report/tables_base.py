"""What the table builders of ``report.tables`` share: column lists, a column, a table
of plain rows."""

from __future__ import annotations

from typing import Any

from kimi_bench.report.table import Column, Table, generic

Dict = dict[str, Any]

PARITY_COLUMNS = (
    "name",
    "width",
    "height",
    "mode",
    "deferred",
    "grid_thw",
    "owner_rank",
    "bit_exact_fp32",
    "bit_exact_bf16",
    "max_abs_diff_vs_pil",
    "reason",
    "decode_path",
    "decode_bit_exact_fp32",
    "decode_bit_exact_bf16",
    "decode_reason",
    "error",
)
FOLD = {"reason", "decode_reason", "error", "mirrors", "why", "note"}
SERVE_COLUMNS = (
    "rate",
    "arm",
    "tool",
    "ttft_median_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "tool_ttft_median_ms",
    "itl_median_ms",
    "itl_p99_ms",
    "tpot_median_ms",
    "tpot_p99_ms",
    "e2e_median_ms",
    "e2e_p99_ms",
    "offered_req_per_s",
    "req_per_s",
    "keep_up",
    "tool_req_per_s",
    "output_tokens_per_s",
    "megapixels_per_s",
    "goodput_req_per_s",
    "completed",
    "failed",
    "stopped_early",
    "forward_batches",
    "bytes_moved",
    "dominant_stage",
)
BY_SIZE_COLUMNS = ("rate", "arm", "size_bucket", "images", "deferred", "raw_bytes", "fp32_bytes",
                   "encoded_bytes", "requests", "ttft_median_ms", "ttft_p90_ms")  # fmt: skip
BY_COUNT_COLUMNS = ("rate", "arm", "images_per_request", "requests", "images", "deferred",
                    "mixed_requests", "raw_bytes", "fp32_bytes", "encoded_bytes",
                    "ttft_median_ms", "ttft_p90_ms")  # fmt: skip
COPY_COLUMNS = ("stage", "op", "src", "dst", "bytes", "count", "mirrors")
CONTROL_COLUMNS = (
    "arm",
    "stage",
    "arm_ms",
    "control_ms",
    "payload_ms",
    "payload_low_ms",
    "payload_high_ms",
    "emulation",
)
OVERHEAD_COLUMNS = (
    "rate",
    "arm",
    "requests",
    "client_ttft_mean_ms",
    "server_ttft_mean_ms",
    "client_overhead_ms",
    "client_overhead_pct",
    "send_lateness_p50_ms",
    "send_lateness_p99_ms",
)
NOISE_MIN_MS = 1.0  # stages shorter than this are not called noisy (as the notes do)


CHOICES = {"deferred"}  # yes/no columns that are decisions, not pass/fail


def col(key: str, fmt: Any = "text", label: str = "") -> Column:
    return Column(key, label, "choice" if key in CHOICES else fmt, fold=key in FOLD)


def present(rows: list[Dict], wanted: tuple[str, ...], always: int = 2) -> list[str]:
    """The wanted columns some row has (the first ``always`` are kept regardless)."""
    return [c for i, c in enumerate(wanted) if i < always or any(c in r for r in rows)]


def rows_table(key: str, title: str, rows: Any, base: str, cols: list[str]) -> Table:
    table = generic(key, title, [r for r in rows or [] if isinstance(r, dict)], base, cols)
    table.columns = [col(c.key) for c in table.columns]
    return table
