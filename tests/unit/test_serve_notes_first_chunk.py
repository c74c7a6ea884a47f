"""serve-ab's note on streams that open with a chunk carrying no text: vllm bench serve's
TTFT ends there, kimi-bench's and sglang.bench_serving's at the first text."""

from __future__ import annotations

from typing import Any

from kimi_bench.bench.serve_notes import serving_notes
from kimi_bench.options import ServeOptions


def _row(rid: int, sent: float, chunk: float, text: float, arm: str = "tf") -> Any:
    return {"rate": "4", "arm": arm, "rid": rid, "ttft_ms": (text - sent) * 1e3,
            "sent_s": sent, "first_chunk_s": chunk, "first_token_s": text}  # fmt: skip


def _notes(rows: list[Any]) -> list[str]:
    return [n for n in serving_notes(ServeOptions(), [], rows).notes if "no text" in n]


def test_role_first_streams_get_both_ttfts_named() -> None:
    rows = [_row(0, 0.0, 0.010, 0.110), _row(1, 1.0, 1.012, 1.062), _row(2, 2.0, 2.2, 2.2)]
    [note] = _notes(rows)
    assert note.startswith("rate 4, tf: 2 of 3 streams opened with a chunk that carried no text")
    assert "vllm bench serve stops TTFT at that chunk (median 12.0 ms here)" in note
    assert "at the first text (median 110.0 ms)" in note


def test_no_note_when_the_first_chunk_comes_with_the_first_token() -> None:
    rows = [_row(i, float(i), i + 0.1, i + 0.1002) for i in range(4)]  # 0.2 ms apart
    assert _notes(rows) == []
    failed = {**_row(9, 0.0, 0.0, 0.5), "ttft_ms": None}
    assert _notes([failed]) == []
