"""JSON Schemas of ``report.json``, one per kind (shipped as ``report-<kind>.schema.json``).

They pin the envelope every report shares (schema version, kind, environment with device,
versions, commit, seed and host load, config, summary with a verdict, notes, results) and
the fields each kind's readers (``gate``, ``compare``, figures, dashboards) rely on.
Numbers are numbers: request rates are numeric with ``null`` for unlimited, image sizes
are integers, and infinities never appear (JSON has none).
"""

from __future__ import annotations

from typing import Any, get_args

from kimi_bench.options import Carrier, MicroCarrier

FINITE = 1e300  # JSON has no inf, but a reader turns 1e999 into one: refused here
NUM = {"type": ["number", "null"], "minimum": -FINITE, "maximum": FINITE}
NONNEG = {"type": ["number", "null"], "minimum": 0, "maximum": FINITE}
INT = {"type": "integer", "minimum": 0}


def _obj(required: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": required, **extra}


ENVIRONMENT = _obj(
    {
        "package_version": {"type": "string"},
        "python": {"type": "string"},
        "torch": {"type": "string"},
        "cuda": {"type": ["string", "null"]},
        "device": {"enum": ["cpu", "cuda"]},
        "device_name": {"type": "string"},
        "gpu_count": INT,
        "cpu_count": INT,
        "git": {"type": "object"},
        "seed": INT,
        "created": {"type": "string"},
        "host_load": _obj(
            {
                "start": {"type": ["object", "null"]},
                "end": {"type": "object"},
                "busy": {"type": "boolean"},
            }
        ),
    }
)
MEASUREMENT = _obj(
    {
        "unit": {"type": "string"},
        "samples": {"type": "array", "items": {"type": "number", "maximum": FINITE}},
        "n": INT,
        "median": NUM,
        "p10": NUM,
        "p90": NUM,
        "iqr": NUM,
    }
)
COMPARISON = _obj(
    {
        "delta_pct": NUM,
        "interval": {"type": ["object", "null"]},
        "verdict": {"type": "string"},
        "significant": {"type": "boolean"},
    }
)
COPY = _obj(
    {
        "stage": {"type": "string"},
        "op": {"type": "string"},
        "src": {"type": "string"},
        "dst": {"type": "string"},
        "bytes": INT,
        "count": INT,
        "mirrors": {"type": "string"},
    }
)


def _envelope(kind: str, summary: dict[str, Any], config: dict[str, Any], **top: Any) -> Any:
    props = {
        "schema_version": {"const": 2},
        "kind": {"const": kind},
        "environment": ENVIRONMENT,
        "config": _obj(config),
        "summary": _obj({"verdict": {"type": "string"}, **summary}),
        "notes": {"type": "array", "items": {"type": "string"}},
        "results": {"type": "array", "items": {"type": "object"}},
        **top,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"kimi-bench {kind} report",
        "type": "object",
        "required": list(props),
        "properties": props,
    }


PARITY = _envelope(
    "parity",
    {
        "accepted": INT,
        "all_bit_exact_fp32": {"type": "boolean"},
        "all_bit_exact_bf16": {"type": "boolean"},
        "differing": {"type": "array", "items": {"type": "string"}},
    },
    {"ranks": INT, "batch_size": INT, "runtime": {"type": "string"}},
)
MICRO = _envelope(
    "micro",
    {
        "arms": {"type": "array", "items": {"type": "string"}},
        "bit_exact_all_repeats": {"type": "boolean"},
        "speedup_median": NONNEG,
        "floor_ms": NONNEG,
        "error": {"type": ["string", "null"]},
    },
    {"ranks": INT, "transport": {"enum": list(get_args(MicroCarrier))},
     "runtime": {"type": "string"},
     "groups": {"type": "array", "items": {"type": "array", "items": INT}}},
    arms={"type": "object", "additionalProperties": _obj({
        "stages": {"type": "object"},
        "total_ms": {"anyOf": [MEASUREMENT, {"type": "null"}]},
        "copies": {"type": "array", "items": COPY},
    })},
    speedups={"type": "object", "additionalProperties": MEASUREMENT},
)  # fmt: skip
# Control plane and payload cost (micro reports since issue 23; optional, so older reports
# stay valid): the blocks the figures and HTML read, and the raw control rounds.
INTERVAL = _obj({"low": NUM, "high": NUM, "kind": {"enum": ["ci", "range", "none"]}})
COST = _obj({"arm_ms": NUM, "control_ms": NUM, "payload_ms": NUM, "interval": INTERVAL})
MICRO["properties"]["control"] = {
    "anyOf": [
        {"type": "null"},
        _obj(
            {
                "rounds": INT,
                "arms": MICRO["properties"]["arms"],
                "payload": {
                    "type": "object",
                    "additionalProperties": _obj(
                        {
                            "stages": {"type": "object", "additionalProperties": COST},
                            "total": COST,
                            "total_without_emulation": COST,
                        }
                    ),
                },
                "payload_speedups": {"type": "object"},
                "emulation_only": {
                    "type": "array",
                    "items": _obj(
                        {
                            "stage": {"type": "string"},
                            "kind": {"enum": ["emulation_only", "stand_in"]},
                            "why": {"type": "string"},
                        }
                    ),
                },
                "floor": _obj({"data_floor_ms": NONNEG, "control_ms": NONNEG, "floor_ms": NONNEG}),
            }
        ),
    ]
}
MICRO["properties"]["control_repeats"] = {
    "type": "object",
    "additionalProperties": {
        "type": "array",
        "items": _obj({"total_ms": NONNEG, "stage_ms": {"type": "object"}}),
    },
}
MICRO["properties"]["summary"]["properties"] |= {
    "control_rounds": INT,
    "floor_with_control_ms": NONNEG,
    "emulation_only_stages": {"type": "array", "items": {"type": "string"}},
}
SERVE = _envelope(
    "serve-ab",
    {
        "failed_requests": INT,
        "rates": {"type": "array", "items": {"type": "string"}},
        "error": {"type": ["string", "null"]},
    },
    {
        "rates": {"type": "array", "items": NONNEG},
        "width": {"type": "integer", "minimum": 1},
        "height": {"type": "integer", "minimum": 1},
        "ranks": INT,
        "transport": {"enum": list(get_args(Carrier))},
    },
    ab={"type": "object", "additionalProperties": {
        "type": "object", "additionalProperties": _obj(
            {"median_ttft": COMPARISON, "p90_ttft": COMPARISON})}},
    requests={"type": "array", "items": _obj({"rate": {"type": "string"},
                                              "arm": {"type": "string"}, "ttft_ms": NONNEG})},
    copies={"type": "array", "items": COPY},
)  # fmt: skip
# optional (reports made before the client overhead existed validate): per rate and arm of
# an HTTP run, client minus server mean TTFT and the sends' lateness; warnings when late
SERVE["properties"]["client_overhead"] = {
    "type": "array",
    "items": _obj(
        {
            "rate": {"type": "string"},
            "arm": {"type": "string"},
            "requests": INT,
            "client_ttft_mean_ms": NONNEG,
            "server_ttft_mean_ms": NONNEG,
            "server_metric": {"type": ["string", "null"]},
            "client_overhead_ms": NUM,
            "client_overhead_pct": NUM,
            "send_lateness_p99_ms": NUM,
        }
    ),
}
SERVE["properties"]["summary"]["properties"]["client_warnings"] = {
    "type": "array", "items": {"type": "string"}}  # fmt: skip
PROJECT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "kimi-bench project report",
    "type": "object",
    "required": ["schema_version", "kind", "environment", "config", "summary", "notes"],
    "properties": {"kind": {"const": "project"}, "notes": {"type": "array"}},
}
REPORT_SCHEMAS = {"parity": PARITY, "micro": MICRO, "serve-ab": SERVE, "project": PROJECT}
