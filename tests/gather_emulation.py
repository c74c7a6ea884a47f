"""The vision data-parallel gather in one process, for tests: each rank's output (its
images' rows, in input order) is padded to the longest rank's length and stacked, as
``all_gather`` returns it on every rank; the pipeline's own ``restore_order`` then strips
the padding and puts every image back in input order."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kimi_bench.pipeline.gather import restore_order


def gather_in_order(
    rank_outputs: Sequence[torch.Tensor], owners: Sequence[int], sizes: Sequence[int]
) -> torch.Tensor:
    """Every image's rows in input order, from the per-rank outputs; with one image this is
    the owner's output (what the broadcast hands every rank)."""
    longest = max(int(t.shape[0]) for t in rank_outputs)
    padded = [
        torch.cat([t, t.new_zeros((longest - int(t.shape[0]), *t.shape[1:]))]) for t in rank_outputs
    ]
    return restore_order(torch.stack(padded), list(owners), list(sizes))
