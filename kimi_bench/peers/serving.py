"""sglang.bench_serving and vllm bench serve result objects (pydantic) and their
per-request rows (``formats`` reads them into runs and checks their figures)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, NonNegativeFloat, NonNegativeInt

from kimi_bench.peers.base import _Loose
from kimi_bench.peers.errors import PeerFormatError
from kimi_bench.peers.figures import PeerRow


class _Serving(_Loose):
    """Fields sglang.bench_serving and vllm bench serve share."""

    request_rate: float | str | None = None
    max_concurrency: Annotated[int, Field(ge=1)] | None = None
    burstiness: Annotated[float, Field(gt=0)] | None = None
    duration: NonNegativeFloat
    completed: NonNegativeInt
    request_throughput: NonNegativeFloat | None = None
    output_throughput: NonNegativeFloat | None = None
    total_output_tokens: NonNegativeInt | None = None
    max_concurrent_requests: NonNegativeInt | None = None
    request_goodput: NonNegativeFloat | None = None
    # sglang: with a speculative server (accept_length > 0) and a chat backend its ITL
    # figures are per retokenized token, not the chunk gaps its per-request lists hold
    accept_length: float | None = None
    ttfts: list[NonNegativeFloat] | None = None
    itls: list[list[NonNegativeFloat]] | None = None
    input_lens: list[NonNegativeInt] | None = None
    output_lens: list[NonNegativeInt] | None = None
    errors: list[str | None] | None = None
    latencies: list[NonNegativeFloat] | None = None
    start_times: list[float] | None = None


class SglangResult(_Serving):
    backend: str
    dataset_name: str | None = None
    server_info: dict[str, Any] | None = None
    concurrency: NonNegativeFloat | None = None  # sum of E2E / duration


class VllmResult(_Serving):
    backend: str | None = None
    endpoint_type: str | None = None
    model_id: str
    num_prompts: NonNegativeInt
    failed: NonNegativeInt | None = None
    date: str | None = None


def _rows(res: _Serving, where: str) -> list[PeerRow] | None:
    """Per-request rows from the detail lists (None when the file has none). A request
    counts as failed when its error is non-empty; its times are then not used."""
    if res.ttfts is None:
        return None
    n = len(res.ttfts)
    lists = {
        "errors": res.errors,
        "itls": res.itls,
        "input_lens": res.input_lens,
        "output_lens": res.output_lens,
        "latencies": res.latencies,
        "start_times": res.start_times,
    }
    for name, xs in lists.items():
        if xs is not None and len(xs) != n:
            raise PeerFormatError(f"{where}: {name} has {len(xs)} entries but ttfts has {n}")
    rows = []
    for i, ttft in enumerate(res.ttfts):
        err = (res.errors[i] if res.errors is not None else None) or None
        itl = res.itls[i] if res.itls is not None else []
        out = res.output_lens[i] if res.output_lens is not None else None
        row = PeerRow(
            rid=i,
            error=err,
            ttft_ms=None if err else ttft * 1e3,
            itl_mean_ms=sum(itl) / len(itl) * 1e3 if itl and not err else None,
            itl_ms=[x * 1e3 for x in itl] if res.itls is not None and not err else None,
            input_tokens=res.input_lens[i] if res.input_lens is not None else None,
            prompt_tokens=res.input_lens[i] if res.input_lens is not None else None,
            output_tokens=out,
        )
        if res.latencies is not None and not err:
            row.e2e_ms = e2e = res.latencies[i] * 1e3
            if out is not None and out > 1:
                row.tpot_ms = (e2e - ttft * 1e3) / (out - 1)
        rows.append(row)
    served = sum(1 for r in rows if r.error is None)
    if served != res.completed:
        raise PeerFormatError(
            f"{where}: completed says {res.completed} but the per-request lists show "
            f"{served} requests without an error: the file disagrees with itself"
        )
    _unique(res, rows, where)
    return rows


def _unique(res: _Serving, rows: list[PeerRow], where: str) -> None:
    """The files name no request: a request is its own start, TTFT, gaps and latency; two
    rows with all of them equal are one request written twice."""
    seen: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(rows):
        if row.error is not None:
            continue
        key = (
            row.ttft_ms,
            tuple(row.itl_ms or ()),
            res.latencies[i] if res.latencies is not None else None,
            res.start_times[i] if res.start_times is not None else None,
        )
        if key in seen:
            raise PeerFormatError(
                f"{where}: request {i} is request {seen[key]} again (the same TTFT, gaps "
                "and times): a duplicated row would count twice"
            )
        seen[key] = i
