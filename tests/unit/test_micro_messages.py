"""The typed records micro's processes send: a decision travels with every field of
``Decision``, named and ordered as ``DecisionDoc`` declares them."""

from __future__ import annotations

import json
from dataclasses import fields

from kimi_bench.domain.policy import Decision
from kimi_bench.engine.micro_messages import DecisionDoc, decision_doc


def test_decision_doc_names_every_field_of_decision_in_order() -> None:
    assert list(DecisionDoc.__annotations__) == [f.name for f in fields(Decision)]


def test_decision_doc_carries_the_values_as_json() -> None:
    d = Decision(True, "fits the owner", 1536 * 1024 * 3, 4 * 1536 * 1024 * 3, encoded=True)
    doc = decision_doc(d)
    assert doc == {
        "defer": True,
        "reason": "fits the owner",
        "raw_bytes": 4718592,
        "processed_bytes": 18874368,
        "encoded": True,
    }
    assert json.loads(json.dumps(doc)) == doc
    assert decision_doc(Decision(False, "eager", 12, 48))["encoded"] is False
