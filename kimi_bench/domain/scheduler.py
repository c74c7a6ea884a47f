"""Scheduler-side emulation: the pre-embed move whitelist and vision data-parallel owner
assignment (SPEC section 6); the gather that restores image order is
``pipeline.gather``."""

from __future__ import annotations

from collections.abc import Sequence

# Model classes that place their multimodal features themselves: the scheduler skips the
# "move every item to the GPU before embedding" step for them. The set is sglang 0.5.23's
# ``_can_skip_pre_embed_feature_move`` (checked by tests/sglang against the installed runtime).
PRE_EMBED_SKIP_MODELS = frozenset(
    {
        "KimiK25ForConditionalGeneration",
        "KimiK3ForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
    }
)

PRESET_MODEL_CLASS = {
    "kimi-k3": "KimiK3ForConditionalGeneration",
    "kimi-k2.5": "KimiK25ForConditionalGeneration",
}


def needs_pre_embed_move(model_class: str) -> bool:
    """True when every rank must move every item to its device before embedding."""
    return model_class not in PRE_EMBED_SKIP_MODELS


def assign_owners(sizes: Sequence[int], n_ranks: int) -> list[int]:
    """Owner rank per image, identical on every rank.

    Largest image first (stable sort on patch count), each to the rank with the smallest
    total so far; the lowest rank wins ties.
    """
    if n_ranks < 1:
        raise ValueError(f"n_ranks must be >= 1, got {n_ranks}")
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    load = [0] * n_ranks
    owners = [0] * len(sizes)
    for i in order:
        rank = min(range(n_ranks), key=lambda r: (load[r], r))
        owners[i] = rank
        load[rank] += sizes[i]
    return owners


def images_of_rank(owners: Sequence[int], rank: int) -> list[int]:
    """Indices of the images a rank owns, in original order."""
    return [i for i, r in enumerate(owners) if r == rank]
