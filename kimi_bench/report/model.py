"""The report envelope shared by every scenario.

``schema_version``, ``kind``, ``environment`` (versions, device, commit, seed), ``config``
(what was asked for), ``summary`` (derived numbers and the verdict), ``notes`` (what a
reader must know: emulation, stand-ins, explanations), ``results`` (one row per input /
stage / request), plus kind-specific blocks (raw samples) under ``data``.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kimi_bench import SCHEMA_VERSION
from kimi_bench.infra.jsonio import InputError, parse_json
from kimi_bench.infra.limits import MAX_REPORT_BYTES, read_text_or
from kimi_bench.report.agree_rows import disagreement
from kimi_bench.report.envelope import Envelope, Header
from kimi_bench.report.files import REPORT_NAMES, is_gzipped, one_per_folder, report_file
from kimi_bench.report.migrate import migrate
from kimi_bench.report.schema import ReportProblem, parse_report

KINDS = ("parity", "micro", "serve-ab", "run", "project")
# A search for report files (report.json, report.json.gz) visits at most this many folder
# entries and this depth; beyond that the folder is not a report folder (``--baseline /``).
MAX_SEARCH_ENTRIES = 20_000
MAX_SEARCH_DEPTH = 8


T = TypeVar("T", bound=Envelope)


class ReportError(ValueError):
    """A report file that cannot be used (missing, not JSON, wrong kind, newer schema,
    a field of the wrong type)."""


@dataclass
class Report:
    kind: str
    environment: dict[str, Any]
    config: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    # the file it was read from (None when built in memory); never written to the JSON
    source: Path | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(
            {
                "schema_version": self.schema_version,
                "kind": self.kind,
                "environment": self.environment,
                "config": self.config,
                "summary": self.summary,
                "notes": self.notes,
                "results": self.results,
                **self.data,
            }
        )

    @property
    def header(self) -> Header:
        """The envelope's kind, environment, config, summary and notes, typed (``Header``:
        a block that does not fit reads as absent)."""
        return Header.model_validate(
            {"kind": self.kind, "environment": self.environment, "config": self.config,
             "summary": self.summary, "notes": self.notes}
        )  # fmt: skip

    def typed(self, model: type[T]) -> T:
        """The report as its kind's model (``report.kinds``), built anew from the current
        fields; ReportError when it does not validate or is not a ``model``."""
        label = str(self.source or f"{self.kind} report")
        try:
            typed = parse_report(self.to_dict())
        except ReportProblem as exc:
            raise ReportError(f"{label}: {exc}") from None
        if not isinstance(typed, model):
            raise ReportError(f"{label} is a {self.kind!r} report, not a {model.__name__}")
        return typed

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Report:
        """A report read from its JSON dict, older layouts brought to the current one."""
        raw = migrate(raw)
        known = {"schema_version", "kind", "environment", "config", "summary", "notes", "results"}
        return cls(
            kind=raw["kind"],
            environment=raw.get("environment", {}),
            config=raw.get("config", {}),
            results=raw.get("results", []),
            summary=raw.get("summary", {}),
            notes=raw.get("notes", []),
            data={k: v for k, v in raw.items() if k not in known},
            schema_version=raw["schema_version"],
        )


def _jsonable(obj: Any) -> Any:
    """Plain JSON types only; NaN/inf become null (JSON has neither)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if hasattr(obj, "item"):
        return _jsonable(obj.item())
    return str(obj)


def _parse(p: Path) -> dict[str, Any]:
    text = read_text_or(ReportError, p, MAX_REPORT_BYTES, "report", gzipped=is_gzipped(p))
    try:
        raw = parse_json(text, f"{p} is not a JSON report")
    except InputError as exc:
        raise ReportError(str(exc)) from None
    if not isinstance(raw, dict) or "schema_version" not in raw or "kind" not in raw:
        raise ReportError(f"{p} has no schema_version/kind: not a kimi-bench report")
    return raw


def check_envelope(raw: dict[str, Any], where: str, kinds: tuple[str, ...] = KINDS) -> None:
    """Version, kind and field types of a report dict, then its derived blocks against its
    raw data (``report.agree``); ReportError names ``where`` and the field."""
    version = raw.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ReportError(
            f"{where}: schema_version must be an integer, got {version!r} "
            f"({type(version).__name__}); this kimi-bench writes {SCHEMA_VERSION}"
        )
    if version > SCHEMA_VERSION:
        raise ReportError(
            f"{where} has schema_version {version}, newer than this kimi-bench understands "
            f"({SCHEMA_VERSION}); upgrade kimi-bench to read it"
        )
    kind = raw.get("kind")
    if kind not in kinds:
        hint = "; a run's folder holds one report per scenario: give those instead"
        hint = hint if kind == "run" else ""
        raise ReportError(f"{where} has kind {kind!r}, expected one of {', '.join(kinds)}{hint}")
    try:
        report = parse_report(raw)
        if (current := migrate(raw)) != raw:  # an older layout: read as the current one
            report = parse_report(current)
    except ReportProblem as exc:
        raise ReportError(f"{where}: {exc}") from None
    if problem := disagreement(report):
        raise ReportError(f"{where}: {problem}")


def validate_report(report: Report, where: str | None = None) -> None:
    """The checks ``load_report`` applies, for a report built in memory."""
    label = where or str(report.source or f"{report.kind} report")
    check_envelope(report.to_dict(), label)


def load_report(
    path: str | Path, expect_kind: str | None = None, kinds: tuple[str, ...] = KINDS
) -> Report:
    """Read and validate a report (a file, or a folder holding ``report.json`` or
    ``report.json.gz``; ``report.files``).

    The file must be a regular file of at most MAX_REPORT_BYTES (a FIFO or a device is
    refused, never read), and a gzip-compressed one must decompress to at most as much;
    its version, kind and the types of the fields consumers read are checked. ``kinds``
    narrows the accepted kinds (the gate takes no ``run``)."""
    p = report_file(Path(path))
    raw = _parse(p)
    check_envelope(raw, str(p), kinds)
    if expect_kind is not None and raw["kind"] != expect_kind:
        raise ReportError(f"{p} is a {raw['kind']!r} report, expected {expect_kind!r}")
    rep = Report.from_dict(raw)
    rep.source = p
    return rep


def _walk(root: Path, depth: int, budget: list[int]) -> Iterator[Path]:
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            raise ReportError(
                f"stopped searching {root}: more than {MAX_SEARCH_ENTRIES:,} entries "
                "below the folder given; point at the folder that holds the reports"
            )
        if entry.is_symlink():
            continue  # links are not followed (they may lead out of the folder)
        if entry.is_dir(follow_symlinks=False):
            if depth < MAX_SEARCH_DEPTH:
                yield from _walk(Path(entry.path), depth + 1, budget)
        elif entry.name in REPORT_NAMES and stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
            yield Path(entry.path)


def find_report_files(root: Path) -> list[Path]:
    """Every regular report file under ``root`` (``report.json``, or ``report.json.gz``
    where the folder holds no ``report.json``; sorted, depth-first).

    Stays inside ``root``: symbolic links are not followed and special files (FIFOs,
    devices) are skipped; at most MAX_SEARCH_DEPTH folders deep, and ReportError after
    MAX_SEARCH_ENTRIES entries (so ``/`` is refused instead of walked)."""
    return one_per_folder(_walk(root, 0, [MAX_SEARCH_ENTRIES]))
