"""Report dicts for the bad-input tests, made by the real builders (``tests.ci_reports``) and
valid unless a test breaks them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests import ci_reports

SAMPLES = [10.0, 10.5, 9.8, 10.2]


def micro(samples: list[float] | None = None, **summary: Any) -> dict[str, Any]:
    raw = ci_reports.micro(samples or SAMPLES, 9.0).to_dict()
    raw["summary"] |= summary
    raw["final"] = True
    return raw


def parity(names: tuple[str, ...] = ("a.png", "b.jpg"), bad: str | None = None) -> dict[str, Any]:
    return ci_reports.parity(names, bad).to_dict() | {"final": True}


def serve(error: str | None = None) -> dict[str, Any]:
    ttft = {"eager": [100.0, 104.0, 98.0, 101.0], "deferred": [60.0, 61.0, 59.0, 62.0]}
    return ci_reports.serve(ttft, error=error).to_dict() | {"final": True}


def put(raw: dict[str, Any] | str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.json"
    path.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return path
