"""Peers' result files, validated with pydantic, each read into :class:`PeerRun`.

- sglang.bench_serving ``--output-file``: JSON Lines, one object per benchmark run
  (a file appended to by several runs holds several; each is one repeat). With
  ``--output-details`` each object carries per-request ``ttfts`` (seconds), ``itls``,
  ``input_lens``, ``output_lens`` and ``errors`` ("" when the request succeeded).
- ``vllm bench serve --save-result``: one JSON object (``--append-result``: several,
  one per line). With ``--save-detailed`` it keeps the same per-request lists.
- GuideLLM (``guidellm benchmark ... --output-path X.json``) and AIPerf
  (``profile_export_aiperf.json``): see ``kimi_bench.peers.tools``.

A file is never trusted blindly: a malformed one raises :class:`PeerFormatError` naming
the file and the field; per-request lists of different lengths are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    ValidationError,
)

from kimi_bench.infra.jsonio import InputError, parse_json, parse_json_lines
from kimi_bench.peers.load import Load

MAX_BYTES = 256 * 1024 * 1024  # the largest result file read


class PeerFormatError(ValueError):
    """A peer's result file that cannot be imported (the CLI's exit 2)."""


@dataclass
class Repeat:
    """One benchmark run of a peer tool: per-request rows when the file has them, and the
    numbers the tool itself states."""

    rows: list[dict[str, Any]] | None
    completed: int
    failed: int | None
    duration_s: float | None
    # the tool's own summary figures: mean/median/p90/p99_ttft_ms, req_per_s, completed
    stated: dict[str, float | None] = field(default_factory=dict)


@dataclass
class PeerRun:
    """Everything read from one result file."""

    tool: str
    version: str | None
    fmt: str
    path: Path
    load: Load  # the offered load as the file records it (rate, concurrency, burstiness)
    repeats: list[Repeat]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def per_request(self) -> bool:
        return all(r.rows is not None for r in self.repeats)


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


def rate_value(raw: float | str | None, where: str) -> float:
    """A request rate as the tools write it ("inf", Infinity, a number)."""
    if raw is None:
        return math.inf
    if isinstance(raw, str):
        try:
            raw = float(raw)
        except ValueError:
            raise PeerFormatError(f"{where}: request_rate {raw!r} is not a number") from None
    if math.isnan(raw) or raw <= 0:
        raise PeerFormatError(f"{where}: request_rate {raw!r} must be > 0 or inf")
    return float(raw)


class _Serving(_Loose):
    """Fields sglang.bench_serving and vllm bench serve share."""

    request_rate: float | str | None = None
    max_concurrency: Annotated[int, Field(ge=1)] | None = None
    burstiness: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    duration: NonNegativeFloat
    completed: NonNegativeInt
    request_throughput: NonNegativeFloat | None = None
    mean_ttft_ms: NonNegativeFloat | None = None
    median_ttft_ms: NonNegativeFloat | None = None
    p90_ttft_ms: NonNegativeFloat | None = None
    p99_ttft_ms: NonNegativeFloat | None = None
    mean_itl_ms: NonNegativeFloat | None = None
    median_itl_ms: NonNegativeFloat | None = None
    p99_itl_ms: NonNegativeFloat | None = None
    # sglang: with a speculative server (accept_length > 0) and a chat backend its ITL
    # figures are per retokenized token, not the chunk gaps its per-request lists hold
    accept_length: float | None = None
    ttfts: list[NonNegativeFloat] | None = None
    itls: list[list[NonNegativeFloat]] | None = None
    input_lens: list[NonNegativeInt] | None = None
    output_lens: list[NonNegativeInt] | None = None
    errors: list[str | None] | None = None
    latencies: list[NonNegativeFloat] | None = None


class SglangResult(_Serving):
    backend: str
    dataset_name: str | None = None
    server_info: dict[str, Any] | None = None


class VllmResult(_Serving):
    backend: str | None = None
    endpoint_type: str | None = None
    model_id: str
    num_prompts: NonNegativeInt
    failed: NonNegativeInt = 0
    date: str | None = None


def field_error(exc: ValidationError, where: str) -> PeerFormatError:
    """The first validation problem, naming the field (``ttfts.3``) and the file."""
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
    return PeerFormatError(f"{where}: field {loc}: {first['msg']} (got {first.get('input')!r:.80})")


def json_objects(text: str, where: str) -> list[dict[str, Any]]:
    """One JSON object, or JSON Lines (one object per non-empty line); nesting bounded
    (``kimi_bench.infra.jsonio``). The tools write ``Infinity`` for an unlimited rate."""
    try:
        whole = parse_json(text, where, constants=True)
    except InputError as exc:
        if "levels deep" in str(exc):
            raise PeerFormatError(str(exc)) from None
        whole = None  # not one document: JSON Lines
    if isinstance(whole, dict):
        return [whole]
    if whole is not None:
        raise PeerFormatError(f"{where}: expected a JSON object, got {type(whole).__name__}")
    try:
        out = parse_json_lines(text, where, constants=True)
    except InputError as exc:
        raise PeerFormatError(str(exc)) from None
    if not out:
        raise PeerFormatError(f"{where}: empty file: no result to import")
    return out


def _rows(res: _Serving, where: str) -> list[dict[str, Any]] | None:
    """Per-request rows from the detail lists (None when the file has none). A request
    counts as failed when its error is non-empty; its TTFT is then not used."""
    if res.ttfts is None:
        return None
    n = len(res.ttfts)
    lists = {"errors": res.errors, "itls": res.itls, "input_lens": res.input_lens,
             "output_lens": res.output_lens, "latencies": res.latencies}  # fmt: skip
    for name, xs in lists.items():
        if xs is not None and len(xs) != n:
            raise PeerFormatError(f"{where}: {name} has {len(xs)} entries but ttfts has {n}")
    rows = []
    for i, ttft in enumerate(res.ttfts):
        err = (res.errors[i] if res.errors is not None else None) or None
        itl = res.itls[i] if res.itls is not None else []
        row: dict[str, Any] = {
            "rid": i,
            "error": err,
            "ttft_ms": None if err else ttft * 1e3,
            "itl_mean_ms": sum(itl) / len(itl) * 1e3 if itl and not err else None,
            "itl_ms": [x * 1e3 for x in itl] if res.itls is not None and not err else None,
            "input_tokens": res.input_lens[i] if res.input_lens is not None else None,
            "output_tokens": res.output_lens[i] if res.output_lens is not None else None,
        }
        if res.latencies is not None and not err:
            row["e2e_ms"] = res.latencies[i] * 1e3
        rows.append(row)
    return rows


def _repeat(res: _Serving, failed: int | None, where: str) -> Repeat:
    rows = _rows(res, where)
    if rows is not None:
        served = sum(1 for r in rows if r["error"] is None)
        if served != res.completed:
            raise PeerFormatError(
                f"{where}: completed says {res.completed} but the per-request lists show "
                f"{served} requests without an error: the file disagrees with itself"
            )
        failed = len(rows) - served
    stated = {"mean_ttft_ms": res.mean_ttft_ms, "median_ttft_ms": res.median_ttft_ms,
              "p90_ttft_ms": res.p90_ttft_ms, "p99_ttft_ms": res.p99_ttft_ms,
              "req_per_s": res.request_throughput, "completed": res.completed}  # fmt: skip
    # sglang's chat backends count a speculative server's ITL per retokenized token
    retokenized = (res.accept_length or 0) > 0 and getattr(res, "backend", None) in (
        "sglang-oai", "sglang-oai-chat")  # fmt: skip
    if rows is not None and res.itls is not None and not retokenized:
        stated |= {"mean_itl_ms": res.mean_itl_ms, "median_itl_ms": res.median_itl_ms,
                   "p99_itl_ms": res.p99_itl_ms}  # fmt: skip
    return Repeat(rows, res.completed, failed, res.duration, stated)


def _one_load(loads: set[Load], path: Path) -> Load:
    if len(loads) > 1:
        shown = ", ".join(sorted(x.label for x in loads))
        raise PeerFormatError(f"{path}: runs at different loads ({shown}): import each separately")
    return loads.pop()


def serving_load(res: _Serving, where: str) -> Load:
    return Load(rate_value(res.request_rate, where), res.max_concurrency, res.burstiness)


def read_sglang(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    repeats, loads, first = [], set(), None
    for k, obj in enumerate(objs):
        where = f"{path} (sglang.bench_serving result {k + 1})"
        try:
            res = SglangResult.model_validate(obj)
        except ValidationError as exc:
            raise field_error(exc, where) from None
        first = first or res
        loads.add(serving_load(res, where))
        repeats.append(_repeat(res, None, where))
    load = _one_load(loads, path)
    assert first is not None
    info = first.server_info or {}
    details = {"backend": first.backend, "dataset": first.dataset_name,
               "server_version": info.get("version")}  # fmt: skip
    return PeerRun("sglang.bench_serving", None, "sglang", path, load, repeats, details)


def read_vllm(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    repeats, loads, first = [], set(), None
    for k, obj in enumerate(objs):
        where = f"{path} (vllm bench serve result {k + 1})"
        try:
            res = VllmResult.model_validate(obj)
        except ValidationError as exc:
            raise field_error(exc, where) from None
        first = first or res
        loads.add(serving_load(res, where))
        rep = _repeat(res, res.failed, where)
        if rep.rows is not None and len(rep.rows) != res.num_prompts:
            raise PeerFormatError(
                f"{where}: num_prompts is {res.num_prompts} but ttfts has {len(rep.rows)} entries"
            )
        repeats.append(rep)
    load = _one_load(loads, path)
    assert first is not None
    details = {"backend": first.backend or first.endpoint_type, "model": first.model_id,
               "date": first.date}  # fmt: skip
    return PeerRun("vllm bench serve", None, "vllm", path, load, repeats, details)
