"""kimi_bench.results.parity: parity's figures derived once from its rows, and what the
read check and the gate make of them (one derive, three readers)."""

from __future__ import annotations

from typing import Any

import pytest

from kimi_bench.report.agree_rows import disagreement
from kimi_bench.report.schema import parse_report
from kimi_bench.results import ResultError, derive_parity, has_fp32, parity_rows


def _row(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "error": None, "bit_exact_fp32": True, "bit_exact_bf16": True,
            "deferred": False, "max_abs_diff_vs_pil": 0.0} | kw  # fmt: skip


SGLANG_ROWS = [
    _row("a", deferred=True, max_abs_diff_vs_pil=0.5),
    _row("b", bit_exact_bf16=False),
    _row("c", decode_path="encoded", decode_bit_exact_fp32=True, decode_bit_exact_bf16=False),
    _row("d", arms={"zero-copy": {"bit_exact_fp32": False, "bit_exact_bf16": True}}),
    {"name": "bad", "error": "InputError: unreadable"},
]
VLLM_ROWS = [_row("x", bit_exact_fp32=None), _row("y", bit_exact_fp32=None),
             {"name": "t", "error": "InputError: no vLLM path"}]  # fmt: skip


def test_sglang_rows_give_every_summary_figure_once():
    d = derive_parity(parity_rows(SGLANG_ROWS))
    assert (d.inputs, d.accepted, d.errors, d.deferred) == (5, 4, 1, 1)
    assert d.rejected == ("bad",)
    assert d.all_bit_exact_fp32 is True and d.all_bit_exact_bf16 is False
    assert d.exactness_differing == ("b",)  # the main arms only: the gate's all_bit_exact
    assert d.differing == ("b", "c", "d")  # ... and the decode arm's and other arms'
    assert d.max_abs_diff_vs_pil == 0.5 and not d.all_bit_exact


def test_vllm_rows_have_no_fp32_verdict_and_are_not_counted_as_differing():
    d = derive_parity(parity_rows(VLLM_ROWS, fp32=False), fp32=False)
    assert d.all_bit_exact_fp32 is None and d.all_bit_exact_bf16 is True
    assert d.differing == () and d.all_bit_exact and d.rejected == ("t",)
    none = derive_parity(parity_rows(VLLM_ROWS[2:], fp32=False), fp32=False)
    assert none.all_bit_exact_fp32 is None and none.all_bit_exact_bf16 is False


def test_an_fp32_verdict_is_required_exactly_when_the_runtime_has_fp32_features():
    with pytest.raises(ResultError, match=r"results\[0\].bit_exact_fp32 is None, but the "
                       "runtime needs bit_exact_fp32"):  # fmt: skip
        parity_rows(VLLM_ROWS)  # an SGLang report whose FP32 was never checked
    lost = [*SGLANG_ROWS[:1], _row("e", bit_exact_fp32=None)]
    with pytest.raises(ResultError, match=r"results\[1\].bit_exact_fp32 is None"):
        parity_rows(lost)  # one row lost its verdict: not counted as exact
    with pytest.raises(ResultError, match="runtime has no FP32 features"):
        parity_rows(SGLANG_ROWS, fp32=False)
    assert not has_fp32({"runtime_profile": {"name": "vllm-0.33", "runtime": "vllm"}})
    assert has_fp32({"runtime_profile": {"runtime": "sglang"}}) and has_fp32({})


def test_other_arms_differ_arm_by_arm_in_order():
    rows = [_row("p", arms={"x": {"bit_exact_fp32": True, "bit_exact_bf16": False},
                            "y": {"bit_exact_fp32": False, "bit_exact_bf16": True}}),
            _row("q", arms={"x": {"bit_exact_fp32": False, "bit_exact_bf16": True}})]  # fmt: skip
    assert derive_parity(parity_rows(rows)).differing == ("p", "q")  # x: p, q; then y: p


def test_no_accepted_input_is_not_bit_exact():
    d = derive_parity(parity_rows([{"name": "bad", "error": "x"}]))
    assert (d.accepted, d.all_bit_exact_fp32, d.all_bit_exact_bf16, d.all_bit_exact) == (
        0, False, False, False)  # fmt: skip


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"error": None}], "results[0].name: Field required"),
        ([_row("a"), _row("b", bit_exact_bf16="yes")], "results[1].bit_exact_bf16"),
        ([_row("a", arms={"x": {"bit_exact_fp32": 1}})], "results[0].arms.x.bit_exact_fp32"),
        ([_row("a", bit_exact_bf16=None)], "an accepted input needs bit_exact_bf16"),
        ({"name": "a"}, "results is missing or not a list"),
    ],
)
def test_rows_that_cannot_be_used_are_named(records: Any, message: str):
    with pytest.raises(ResultError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parity_rows(records)


def test_a_stated_figure_that_disagrees_with_the_rows_is_named():
    d = derive_parity(parity_rows(SGLANG_ROWS))
    summary = d.summary_fields()
    assert d.disagreement(summary) is None
    assert d.disagreement({"differing": ["d", "c", "b"]}) is None  # order is free
    assert d.disagreement({}) is None  # absent: nothing to check
    bad = d.disagreement(summary | {"accepted": 5})
    assert bad == "summary.accepted says 5 but the rows give 4"
    assert "summary.all_bit_exact_bf16" in str(
        d.disagreement(summary | {"all_bit_exact_bf16": True})
    )
    assert "summary.differing" in str(d.disagreement(summary | {"differing": ["b"]}))


def _read(raw: dict[str, Any]) -> str | None:
    """The read check of a report dict, parsed as ``check_envelope`` parses it."""
    return disagreement(parse_report(raw | {"schema_version": 1}))


def test_the_read_check_uses_the_same_derivation():
    d = derive_parity(parity_rows(VLLM_ROWS, fp32=False), fp32=False)
    vllm = {"runtime_profile": {"name": "vllm-0.33", "runtime": "vllm"}}
    raw = {"kind": "parity", "config": vllm, "results": VLLM_ROWS, "summary": d.summary_fields()}
    assert _read(raw) is None  # a vLLM report (no FP32 verdicts) reads back
    sglang = raw | {"config": {"runtime_profile": {"runtime": "sglang"}}}
    assert "results[0].bit_exact_fp32 is None" in str(_read(sglang))
    assert _read(raw | {"summary": d.summary_fields() | {"inputs": 3.0}}) is None
    edited = raw | {"summary": d.summary_fields() | {"errors": 0}}
    assert "summary.errors says 0 but the rows give 1" in str(_read(edited))
