"""JSON Schemas of ``report.json``, one per kind (shipped as ``report-<kind>.schema.json``),
generated from the typed report models in ``kimi_bench.report.kinds``: the envelope every
report shares and the fields each kind's readers (``gate``, ``compare``, figures,
``project``) rely on. Other fields are free, as they are for the models."""

from __future__ import annotations

from typing import Any

from kimi_bench.report.kinds import MODELS


def report_schema(kind: str) -> dict[str, Any]:
    """The schema of one kind's report, as its model validates it."""
    schema = MODELS[kind].model_json_schema(ref_template="#/$defs/{model}")
    schema["properties"]["kind"] = {"const": kind}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"kimi-bench {kind} report",
        **{k: v for k, v in schema.items() if k != "title"},
    }


REPORT_SCHEMAS = {kind: report_schema(kind) for kind in MODELS}
