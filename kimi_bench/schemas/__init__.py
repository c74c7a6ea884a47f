"""JSON Schemas shipped with kimi-bench, generated from the typed models.

``scenario.schema.json`` describes scenario TOML files (one table per part); regenerate
it with ``python -m kimi_bench.schemas`` after changing ``kimi_bench.options`` (a test
fails while it is out of date)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kimi_bench.options import GateOptions, MicroOptions, ParityOptions, ServeOptions
from kimi_bench.schemas.report import REPORT_SCHEMAS

HERE = Path(__file__).resolve().parent
SCENARIO_SCHEMA = HERE / "scenario.schema.json"


def scenario_schema() -> dict[str, Any]:
    """The schema of a scenario file: tables [run], [parity], [micro], [serve_ab], [gate]."""
    defs: dict[str, Any] = {}

    def table(model: type[BaseModel]) -> dict[str, Any]:
        schema = model.model_json_schema(by_alias=False, ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        return schema

    run = {
        "type": "object",
        "additionalProperties": False,
        "description": "Applies to the whole scenario; seed and device reach every part.",
        "properties": {
            "description": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0},
            "device": {"enum": ["auto", "cpu", "cuda"]},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kimi-bench scenario",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "run": run,
            "parity": table(ParityOptions),
            "micro": table(MicroOptions),
            "serve_ab": table(ServeOptions),
            "gate": table(GateOptions),
        },
        "$defs": defs,
    }


def report_schema_path(kind: str) -> Path:
    return HERE / f"report-{kind}.schema.json"


def validate_report(report: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``report`` matches its kind's schema."""
    import jsonschema

    schema = json.loads(report_schema_path(str(report.get("kind"))).read_text())
    jsonschema.validate(report, schema)


def write_schemas() -> list[Path]:
    SCENARIO_SCHEMA.write_text(json.dumps(scenario_schema(), indent=1, sort_keys=True) + "\n")
    written = [SCENARIO_SCHEMA]
    for kind, schema in REPORT_SCHEMAS.items():
        path = report_schema_path(kind)
        path.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for p in write_schemas():
        print(p)
