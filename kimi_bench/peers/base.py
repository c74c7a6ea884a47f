"""What every peer reader shares: the error, the run, repeat, row and stated-figure
records, the loose pydantic base, JSON (Lines) reading and the request-rate value."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from kimi_bench.infra.jsonio import InputError, parse_json, parse_json_lines
from kimi_bench.peers.errors import PeerFormatError
from kimi_bench.peers.load import Load

if TYPE_CHECKING:
    from kimi_bench.peers.figures import Figure, PeerRow

__all__ = ["MAX_BYTES", "PeerFormatError", "PeerRun", "Repeat", "Stated"]

MAX_BYTES = 256 * 1024 * 1024  # the largest result file read


@dataclass(frozen=True)
class Stated:
    """The tool's own summary figures the report re-checks (``report.agree_rows``); the
    ITL ones only where the rows' gaps check them (``itl_held``)."""

    mean_ttft_ms: float | None
    median_ttft_ms: float | None
    p90_ttft_ms: float | None
    p99_ttft_ms: float | None
    req_per_s: float | None
    completed: float | None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    itl_held: bool = False

    @classmethod
    def of(
        cls, figs: Sequence[Figure], req_per_s: float | None, completed: float | None, itl: bool
    ) -> Stated:
        """The TTFT figures of ``figs``, and with ``itl`` its ITL figures."""
        by = {(f.metric, f.stat): f.stated for f in figs}
        t = {s: by.get(("ttft", s)) for s in ("mean", "median", "p90", "p99")}
        i = {s: by.get(("itl", s)) if itl else None for s in ("mean", "median", "p99")}
        ttft = (t["mean"], t["median"], t["p90"], t["p99"])
        return cls(*ttft, req_per_s, completed, i["mean"], i["median"], i["p99"], itl)

    def as_dict(self) -> dict[str, float | None]:
        out = {k: v for k, v in asdict(self).items() if k != "itl_held"}
        return out if self.itl_held else {k: v for k, v in out.items() if "_itl_" not in k}


@dataclass
class Repeat:
    """One benchmark run of a peer tool: per-request rows when the file has them, and the
    numbers the tool itself states."""

    rows: list[PeerRow] | None
    completed: int
    failed: int | None
    duration_s: float | None
    stated: Stated | None = None  # None: the file states no summary (AIPerf's records alone)
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
    return PeerFormatError(f"{where}: field {loc}: {first['msg']} (got {first['input']!r:.80})")


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


def once_each(objs: Sequence[object], where: str, what: str) -> None:
    """Each run line (any JSON value) once: the same line twice would count as two repeats."""
    seen: dict[str, int] = {}
    for k, obj in enumerate(objs):
        key = json.dumps(obj, sort_keys=True)
        if key in seen:
            raise PeerFormatError(
                f"{where}: {what} {k + 1} is {what} {seen[key] + 1} again (the same run line "
                "twice): it would count as a second repeat"
            )
        seen[key] = k
