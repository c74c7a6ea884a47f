"""JSON Schemas of the report fields that ``gate`` and ``compare`` read, checked with
``jsonschema`` before any rule runs, so that a hand-edited or hostile report is refused
with the report and the field named (``"5"`` where a number belongs, a list where an
object belongs) instead of failing inside a rule.

Only what a consumer reads is constrained; other fields are free (``additionalProperties``
stays open) so that a report may carry more than this version of kimi-bench knows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# JSON has no NaN/inf (reports write null), but a reader turns 1e999 into inf: the
# maximum refuses it. Times, bytes and counts are never negative.
_FINITE = 1e300
_NUM = {"type": ["number", "null"], "minimum": -_FINITE, "maximum": _FINITE}
_NONNEG = {"type": ["number", "null"], "minimum": 0, "maximum": _FINITE}
_PCT = {"type": ["number", "null"], "minimum": -100, "maximum": _FINITE}
_INT = {"type": ["integer", "null"], "minimum": 0}
_BOOL = {"type": ["boolean", "null"]}
_STR = {"type": ["string", "null"]}
_SAMPLES = {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": _FINITE}}


def _obj(props: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required)}


ENVELOPE = _obj(
    {
        "schema_version": {"type": "integer", "minimum": 1},
        "final": {"type": "boolean"},
        "kind": {"type": "string"},
        "environment": {"type": "object"},
        "config": {"type": "object"},
        "summary": _obj({"verdict": _STR, "error": _STR}),
        "notes": {"type": "array", "items": {"type": "string"}},
        "results": {"type": "array", "items": {"type": "object"}},
    },
    required=("schema_version", "kind"),
)

PARITY = _obj(
    {
        "summary": _obj({"accepted": _INT}),
        "results": {
            "type": "array",
            "items": _obj(
                {
                    "name": {"type": "string"},
                    "error": _STR,
                    "deferred": _BOOL,
                    "bit_exact_fp32": _BOOL,
                    "bit_exact_bf16": _BOOL,
                },
                required=("name",),
            ),
        },
    }
)

# an arm may lack blocks (older or partial runs): a metric it lacks fails its rule by name
_ARM = _obj(
    {
        "total_ms": _obj({"samples": _SAMPLES}),
        "stages": {
            "type": "object",
            "additionalProperties": _obj({"samples_ms": _SAMPLES}),
        },
    }
)

MICRO = _obj(
    {
        "summary": _obj(
            {
                key: _NONNEG
                for key in (
                    "speedup_median",
                    "deferred_over_floor",
                    "bytes_ratio",
                    "floor_ms",
                    "deferred_median_ms",
                )
            }
            | {"repeats_completed": _INT}
            | {"bit_exact_all_repeats": _BOOL}
        ),
        "arms": {"type": "object", "additionalProperties": _ARM},
        "speedup": _obj({"samples": _SAMPLES}),
    },
    required=("arms",),
)

# ab[rate] holds, per arm, Measurement comparisons with ``delta_pct`` (B vs eager, in
# percent); earlier reports held the metrics directly with ``delta`` (a fraction).
# ``report_problem`` picks the layout, so a bad value is named by its own field.
_AB_BY_ARM = {
    "type": "object",
    "additionalProperties": {
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "additionalProperties": {"anyOf": [{"type": "null"}, _obj({"delta_pct": _PCT})]},
            },
        ]
    },
}
_AB_EARLIER = {
    "type": "object",
    "additionalProperties": {"anyOf": [{"type": "null"}, _obj({"delta": _NUM})]},
}


def _serve(ab_entry: dict[str, Any]) -> dict[str, Any]:
    return _obj(
        {
            "summary": _obj(
                {"failed_requests": _INT, "rates": {"type": "array", "items": {"type": "string"}}}
            ),
            "results": {
                "type": "array",
                "items": _obj(
                    {
                        "rate": {"type": "string"},
                        "arm": {"type": "string"},
                        "ttft_median_ms": _NONNEG,
                        "ttft_p90_ms": _NONNEG,
                        "req_per_s": _NONNEG,
                        "completed": _INT,
                        "failed": _INT,
                    },
                    required=("rate", "arm"),
                ),
            },
            "ab": {
                "type": "object",
                "additionalProperties": {"anyOf": [{"type": "null"}, ab_entry]},
            },
            "requests": {
                "type": "array",
                "items": _obj(
                    {"rate": {"type": "string"}, "arm": {"type": "string"}, "ttft_ms": _NONNEG},
                    required=("rate", "arm"),
                ),
            },
        },
        required=("requests",),
    )


def _earlier_ab(raw: dict[str, Any]) -> bool:
    """Whether ``ab`` uses the earlier layout (``ab[rate][metric].delta``)."""
    ab = raw.get("ab")
    entries = ab.values() if isinstance(ab, dict) else []
    return any(
        isinstance(e, dict) and any(isinstance(v, dict) and "delta" in v for v in e.values())
        for e in entries
    )


BY_KIND: dict[str, dict[str, Any]] = {
    "parity": PARITY,
    "micro": MICRO,
    "serve-ab": _serve(_AB_BY_ARM),
}
SERVE_EARLIER = _serve(_AB_EARLIER)


def _where(path: Iterable[Any]) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "(top level)"


def schema_problem(raw: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """The most relevant violation of ``schema`` as ``field summary.x: message``, or None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    err = best_match(Draft202012Validator(schema).iter_errors(raw))
    if err is None:
        return None
    return f"field {_where(err.absolute_path)}: {err.message}"


def report_problem(raw: dict[str, Any]) -> str | None:
    """The first problem of a report dict: its envelope, then its kind's fields."""
    problem = schema_problem(raw, ENVELOPE)
    if problem is None and raw.get("kind") in BY_KIND:
        kind = raw["kind"]
        schema = SERVE_EARLIER if kind == "serve-ab" and _earlier_ab(raw) else BY_KIND[kind]
        problem = schema_problem(raw, schema)
    return problem
