"""Scheduler-side comparisons on generated batches: vision-DP owner assignment
(``get_dp_encoder_lb_assignment`` vs ``kimi_bench.domain.scheduler.assign_owners``) and the
pre-embed move whitelist (``_can_skip_pre_embed_feature_move`` vs
``kimi_bench.domain.scheduler.needs_pre_embed_move``)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kimi_bench.sglang_ref.calls as C
import kimi_bench.sglang_ref.runtime as R
from kimi_bench.domain.config import PRESETS
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.scheduler import (
    PRE_EMBED_SKIP_MODELS,
    PRESET_MODEL_CLASS,
    assign_owners,
    images_of_rank,
    needs_pre_embed_move,
)

_EDGE_CASES: tuple[tuple[tuple[int, ...], int], ...] = (
    ((), 2),  # an empty batch
    ((64,), 1),  # one image, one rank
    ((64,), 8),  # one image, many ranks
    ((100, 100, 100, 100), 2),  # all ties
    ((1000, 100, 200, 50), 2),  # the runtime's docstring example
    ((5, 5, 9, 9, 1), 3),  # ties on size and on load
    ((1, 1, 1), 8),  # more ranks than images
)


def assignment_cases(seed: int = 0, count: int = 200) -> list[tuple[list[int], int]]:
    """Batches of patch counts and a rank count: fixed edge cases (ties, more ranks than
    images, an empty batch), then ``count`` random batches whose sizes are the patch
    counts of random image sizes under both presets, with repeats to force ties."""
    rng = random.Random(seed)
    cfgs = list(PRESETS.values())
    cases = [(list(sizes), n) for sizes, n in _EDGE_CASES]
    for _ in range(count):
        n_images = rng.randint(1, 24)
        cfg = rng.choice(cfgs)
        sizes = [
            plan_resize(rng.randint(1, 5000), rng.randint(1, 5000), cfg).num_patches
            for _ in range(n_images)
        ]
        for _ in range(rng.randint(0, n_images // 2)):  # repeated sizes: ties
            sizes[rng.randrange(n_images)] = rng.choice(sizes)
        cases.append((sizes, rng.randint(1, 8)))
    return cases


def compare_assignments(
    cases: Sequence[tuple[Sequence[int], int]], runtime: R.Runtime | None = None
) -> list[dict[str, Any]]:
    """One row per batch: owners from both, and each rank's images in the order each
    hands them to the rank (kimi-bench: original order; the runtime: assignment order,
    largest first). ``owners_equal`` is the check; the order is recorded, since both
    gathers restore the original image order."""
    rt = runtime if runtime is not None else R.load_runtime()
    rows = []
    for sizes, n_ranks in cases:
        ours = assign_owners(list(sizes), n_ranks)
        theirs, per_rank = C.owner_assignment(rt, list(sizes), n_ranks)
        ours_per_rank = [images_of_rank(ours, r) for r in range(n_ranks)]
        rows.append(
            {
                "sizes": list(sizes),
                "n_ranks": n_ranks,
                "owners": ours,
                "reference_owners": theirs,
                "owners_equal": ours == theirs,
                "rank_images": ours_per_rank,
                "reference_rank_images": per_rank,
                "rank_image_sets_equal": [sorted(x) for x in per_rank] == ours_per_rank,
            }
        )
    return rows


def first_assignment_difference(rows: Sequence[dict[str, Any]]) -> str | None:
    for row in rows:
        if not row["owners_equal"] or not row["rank_image_sets_equal"]:
            return (
                f"sizes {row['sizes']} on {row['n_ranks']} ranks: kimi-bench owners "
                f"{row['owners']} vs sglang {row['reference_owners']}"
            )
    return None


_CLASS_RE = re.compile(r"^class (\w+ForConditionalGeneration)\b", re.MULTILINE)


def whitelist_candidates(runtime: R.Runtime | None = None) -> list[str]:
    """Model class names to compare: kimi-bench's whitelist and preset classes, its eager
    baseline name, and every ``*ForConditionalGeneration`` class defined in the installed
    runtime's model files (read as text, not imported)."""
    rt = runtime if runtime is not None else R.load_runtime()
    names = set(PRE_EMBED_SKIP_MODELS) | set(PRESET_MODEL_CLASS.values())
    names.add("EagerBaselineModel")
    models_dir = Path(rt.location) / "srt" / "models"
    for path in sorted(models_dir.glob("*.py")):
        names |= set(_CLASS_RE.findall(path.read_text(encoding="utf-8", errors="replace")))
    return sorted(names)


def compare_whitelist(
    model_classes: Sequence[str], runtime: R.Runtime | None = None
) -> list[dict[str, Any]]:
    """One row per model class: does every rank move every item before embedding?"""
    rt = runtime if runtime is not None else R.load_runtime()
    rows = []
    for name in model_classes:
        ours = needs_pre_embed_move(name)
        theirs = not C.skips_pre_embed_move(rt, name)
        rows.append(
            {
                "model_class": name,
                "needs_pre_embed_move": ours,
                "reference_needs_pre_embed_move": theirs,
                "equal": ours == theirs,
            }
        )
    return rows


def first_whitelist_difference(rows: Sequence[dict[str, Any]]) -> str | None:
    for row in rows:
        if not row["equal"]:
            return (
                f"{row['model_class']}: kimi-bench needs_pre_embed_move="
                f"{row['needs_pre_embed_move']} vs sglang "
                f"{row['reference_needs_pre_embed_move']}"
            )
    return None
