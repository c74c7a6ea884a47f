"""What every peer reader shares: the error, the run and repeat records, the loose
pydantic base, JSON (Lines) reading and the request-rate value."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from kimi_bench.infra.jsonio import InputError, parse_json, parse_json_lines
from kimi_bench.peers.errors import PeerFormatError
from kimi_bench.peers.load import Load

if TYPE_CHECKING:
    from kimi_bench.peers.figures import Figure

__all__ = ["MAX_BYTES", "PeerFormatError", "PeerRun", "Repeat"]

MAX_BYTES = 256 * 1024 * 1024  # the largest result file read


@dataclass
class Repeat:
    """One benchmark run of a peer tool: per-request rows when the file has them, and the
    numbers the tool itself states."""

    rows: list[dict[str, Any]] | None
    completed: int
    failed: int | None
    duration_s: float | None
    # the tool's own summary figures the report re-checks (``report.agree_rows``):
    # mean/median/p90/p99_ttft_ms, mean/median/p99_itl_ms, req_per_s, completed
    stated: dict[str, float | None] = field(default_factory=dict)
    # every figure the tool states, beside what its rows give by its method
    figures: list[Figure] = field(default_factory=list)


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
    digest: str = ""  # sha256 of the file's text: one file cannot be two arms

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


def once_each(objs: list[dict[str, Any]], where: str, what: str) -> None:
    """Each run line once: the same line twice would count as two repeats."""
    seen: dict[str, int] = {}
    for k, obj in enumerate(objs):
        key = json.dumps(obj, sort_keys=True)
        if key in seen:
            raise PeerFormatError(
                f"{where}: {what} {k + 1} is {what} {seen[key] + 1} again (the same run line "
                "twice): it would count as a second repeat"
            )
        seen[key] = k
