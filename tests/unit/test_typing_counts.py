"""Issue 41: the results side (``report/``, ``ci/``, ``project/``, ``peers/``) reads typed
models, not dicts. ``tests.typing_counts`` counts what is left; these limits are what the
code had when they were set, so a change may lower the counts but not raise them. The
peers' file parsers and the schema migration read outside formats by key and are counted
apart (not limited here)."""

from __future__ import annotations

from tests.typing_counts import measure

# what main had when these were last lowered (the goal: <= 20 and <= 80)
MAX_UNTYPED_DATA = 25
MAX_GETS = 55


def test_no_function_leaves_a_parameter_or_its_return_unannotated() -> None:
    counted, excepted = measure()
    assert counted.unannotated == [] and excepted.unannotated == []


def test_untyped_data_signatures_do_not_grow() -> None:
    counted, _ = measure()
    assert len(counted.untyped_data) <= MAX_UNTYPED_DATA, "\n".join(counted.untyped_data)


def test_get_by_key_calls_do_not_grow() -> None:
    counted, _ = measure()
    assert counted.gets <= MAX_GETS
