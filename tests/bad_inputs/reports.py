"""Hand-built reports for the bad-input tests (valid unless a test breaks them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kimi_bench import SCHEMA_VERSION

ENV = {"device_name": "test-cpu", "device": "cpu"}


def micro(samples: list[float] | None = None, **summary: Any) -> dict[str, Any]:
    xs = samples or [10.0, 10.5, 9.8, 10.2]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "micro",
        "environment": ENV,
        "config": {"groups": [[2, 64, 48]], "ranks": 2, "transport": "shm"},
        "summary": {
            "verdict": "deferred 9.00x faster",
            "speedup_median": 9.0,
            "deferred_over_floor": 2.0,
            "bytes_ratio": 4.0,
            "bit_exact_all_repeats": True,
            "error": None,
        }
        | summary,
        "notes": [],
        "results": [],
        "arms": {
            "eager": {"total_ms": {"samples": [x * 9 for x in xs]}, "stages": {}},
            "deferred": {
                "total_ms": {"samples": xs},
                "stages": {"producer": {"samples_ms": xs, "applicable": True}},
            },
        },
        "speedup": {"samples": [9.0] * len(xs)},
    }


def parity(names: tuple[str, ...] = ("a.png", "b.jpg"), bad: str | None = None) -> dict[str, Any]:
    rows = [
        {"name": n, "error": None, "bit_exact_fp32": n != bad, "bit_exact_bf16": True}
        for n in names
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "parity",
        "environment": ENV,
        "config": {"preprocess": {"name": "kimi-k3"}, "policy": "request"},
        "summary": {"verdict": "BIT-IDENTICAL", "accepted": len(rows)},
        "notes": [],
        "results": rows,
    }


def serve(error: str | None = None) -> dict[str, Any]:
    reqs = [
        {"rate": "inf", "arm": a, "ttft_ms": 10.0 + i}
        for a in ("eager", "deferred")
        for i in range(3)
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "serve-ab",
        "environment": ENV,
        "config": {"rates": ["inf"], "ranks": 2, "resolution": "64x48", "transport": "shm"},
        "summary": {
            "verdict": ("INCOMPLETE: " + error) if error else "deferred vs eager: ...",
            "failed_requests": 0,
            "error": error,
            "rates": ["inf"],
        },
        "notes": [],
        "results": [],
        "ab": {"inf": {"deferred": {"median_ttft": {"delta_pct": -20.0}}}},
        "requests": reqs,
    }


def put(raw: dict[str, Any] | str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.json"
    path.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return path
