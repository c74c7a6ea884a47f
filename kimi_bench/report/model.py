"""The report envelope shared by every scenario.

``schema_version``, ``kind``, ``environment`` (versions, device, commit, seed), ``config``
(what was asked for), ``summary`` (derived numbers and the verdict), ``notes`` (what a
reader must know: emulation, stand-ins, explanations), ``results`` (one row per input /
stage / request), plus kind-specific blocks (raw samples) under ``data``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimi_bench import SCHEMA_VERSION

KINDS = ("parity", "micro", "serve-ab", "run")


class ReportError(ValueError):
    """A report file that cannot be used (missing, not JSON, wrong kind, newer schema)."""


@dataclass
class View:
    """A table for humans (Markdown/CSV); never part of the JSON."""

    title: str
    rows: list[dict[str, Any]]
    columns: list[str] | None = None


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
    views: list[View] = field(default_factory=list, repr=False)

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

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Report:
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


def load_report(path: str | Path, expect_kind: str | None = None) -> Report:
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise ReportError(f"report not found: {p}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"{p} is not a JSON report: {exc}") from None
    if not isinstance(raw, dict) or "schema_version" not in raw or "kind" not in raw:
        raise ReportError(f"{p} has no schema_version/kind: not a kimi-bench report")
    version = raw["schema_version"]
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ReportError(
            f"{p} has schema_version {version}, newer than this kimi-bench understands "
            f"({SCHEMA_VERSION}); upgrade kimi-bench to read it"
        )
    if raw["kind"] not in KINDS:
        raise ReportError(f"{p} has unknown kind {raw['kind']!r}; expected one of {KINDS}")
    if expect_kind is not None and raw["kind"] != expect_kind:
        raise ReportError(f"{p} is a {raw['kind']!r} report, expected {expect_kind!r}")
    return Report.from_dict(raw)
