"""Owner assignment and the pre-embed whitelist, against the runtime's own functions."""

from __future__ import annotations

import pytest

from kimi_bench.domain.scheduler import PRE_EMBED_SKIP_MODELS, PRESET_MODEL_CLASS
from kimi_bench.sglang_ref import (
    Runtime,
    assignment_cases,
    compare_assignments,
    compare_whitelist,
    first_assignment_difference,
    first_whitelist_difference,
    whitelist_candidates,
)
from kimi_bench.sglang_ref import calls as C

pytestmark = pytest.mark.sglang


def test_owner_assignment_identical_on_generated_batches(rt: Runtime) -> None:
    cases = assignment_cases(seed=0, count=300)
    rows = compare_assignments(cases, runtime=rt)
    assert len(rows) == len(cases) > 300
    assert first_assignment_difference(rows) is None
    # the generated batches exercise ties, more ranks than images and empty ranks
    assert any(len(set(r["sizes"])) < len(r["sizes"]) for r in rows)
    assert any(r["n_ranks"] > len(r["sizes"]) for r in rows)


def test_runtime_hands_a_rank_its_images_largest_first(rt: Runtime) -> None:
    """kimi-bench lists a rank's images in original order, the runtime in assignment
    order; both gathers restore the original order, so only the owners must agree."""
    rows = compare_assignments([([10, 50, 30, 40], 2)], runtime=rt)
    # 50 -> r0, 40 -> r1, 30 -> r1 (40 < 50), 10 -> r0 (50 < 70)
    assert rows[0]["owners"] == rows[0]["reference_owners"] == [0, 0, 1, 1]
    assert rows[0]["rank_images"] == [[0, 1], [2, 3]]
    assert rows[0]["reference_rank_images"] == [[1, 0], [3, 2]]


def test_whitelist_identical_for_every_runtime_model_class(rt: Runtime) -> None:
    names = whitelist_candidates(rt)
    assert set(PRE_EMBED_SKIP_MODELS) <= set(names)
    assert len(names) > 20  # the runtime's own multimodal model classes are included
    rows = compare_whitelist(names, runtime=rt)
    assert first_whitelist_difference(rows) is None
    skipped = {r["model_class"] for r in rows if not r["reference_needs_pre_embed_move"]}
    assert skipped == set(PRE_EMBED_SKIP_MODELS)
    assert set(PRESET_MODEL_CLASS.values()) <= skipped


def test_whitelist_reads_the_method_name(rt: Runtime) -> None:
    assert C.skips_pre_embed_move(rt, "KimiK3ForConditionalGeneration", "get_video_feature")
    assert not C.skips_pre_embed_move(rt, "KimiK3ForConditionalGeneration", "get_audio_feature")
