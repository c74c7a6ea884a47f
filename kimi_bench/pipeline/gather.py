"""The encoder-output gather of the pipeline (SPEC section 6), the step after the owners'
materialization; ``kimi_bench.pipeline`` exports it as ``pipeline.gather``.

With a device group (one GPU per rank: the NCCL group ``engine/launch.py`` creates next to
the gloo group) it moves real tensors, as the runtime does: a single image is broadcast
from its owner; otherwise every rank pads its BF16 output (the tower buffer stands in for
the encoder output) to the longest rank's length, all-gathers, strips the padding and puts
the images back in input order. Without one (ranks share a GPU, or no CUDA) it carries
metadata only over the gloo group (``all_gather_object`` of the patch counts) and the
ledger says so. The padding and the re-ordering are device-internal copies (compute, like
the BF16 cast) and are not listed in the ledger; the collective's bytes are.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.scheduler import images_of_rank
from kimi_bench.pipeline.step import RankOutput, Step

TOWER_DTYPE = torch.bfloat16
METADATA_ONLY = "encoder gather: metadata only (ranks share a device), all_gather_object"


class GatherError(RuntimeError):
    """The gathered encoder output is not the owners' outputs in input order."""


def row_shape(step: Step) -> tuple[int, int, int]:
    """One patch row of the tower buffer: (3, patch, patch)."""
    return (3, step.cfg.patch_size, step.cfg.patch_size)


def gather(
    step: Step, out: RankOutput, rank: int, world: int, group: Any = None
) -> torch.Tensor | None:
    """Every image's encoder output in input order on every rank (over ``group``), checked
    against this rank's own rows; ``None`` when there is no device group (metadata only).
    Marks ``gather``. Every rank holding every image (``out.replicated``, vLLM's encoder
    TP mode ``weights``) gathers nothing: its tower buffer is the result (None without a
    device group, as a metadata-only gather)."""
    if out.replicated:
        step.hook.mark("gather")
        return out.tower if group is not None else None
    if group is None:
        _metadata_only(step, out, rank, world)
        step.hook.mark("gather")
        return None
    result = _tensors(step, out, rank, world, group)
    check_gathered(result, out)
    step.hook.mark("gather")
    return result


def _metadata_only(step: Step, out: RankOutput, rank: int, world: int) -> None:
    if world == 1:
        return
    sizes: list[Any] = [None] * world
    dist.all_gather_object(sizes, (rank, out.patches))
    own = 0 if out.tower is None else tensor_bytes(out.tower)
    step.ledger.add("gather", "gather_metadata", "device", "wire", own, METADATA_ONLY)


def _tensors(step: Step, out: RankOutput, rank: int, world: int, group: Any) -> torch.Tensor:
    row = row_shape(step)
    if not out.sizes:
        return torch.empty((0, *row), dtype=TOWER_DTYPE, device=step.device)
    backend = str(dist.get_backend(group))
    if len(out.sizes) == 1:  # a single image: broadcast from its owner
        src = out.owners[0]
        if rank == src and out.tower is not None:
            buf = out.tower
        else:
            buf = torch.empty((out.sizes[0], *row), dtype=TOWER_DTYPE, device=step.device)
        dist.broadcast(buf, src=src, group=group)
        if rank == src and world > 1:
            step.ledger.add(
                "gather", f"{backend}_broadcast", "device", "wire", tensor_bytes(buf) * (world - 1),
                "encoder gather: broadcast from the owner", count=world - 1,
            )  # fmt: skip
        return buf
    lengths = [sum(out.sizes[i] for i in images_of_rank(out.owners, r)) for r in range(world)]
    longest = max(lengths)
    padded = torch.zeros((longest, *row), dtype=TOWER_DTYPE, device=step.device)
    if out.tower is not None:
        padded[: out.patches].copy_(out.tower)
    full = torch.empty((world * longest, *row), dtype=TOWER_DTYPE, device=step.device)
    _all_gather_single(full, padded, group)
    if world > 1:
        step.ledger.add(
            "gather", f"{backend}_all_gather", "device", "wire",
            tensor_bytes(padded) * (world - 1), "encoder gather: pad + all_gather",
            count=world - 1,
        )  # fmt: skip
    return restore_order(full.view(world, longest, *row), out.owners, out.sizes)


def _all_gather_single(output: torch.Tensor, inp: torch.Tensor, group: Any) -> None:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(output, inp, group=group)


def restore_order(gathered: torch.Tensor, owners: list[int], sizes: list[int]) -> torch.Tensor:
    """``gathered[r]`` holds rank r's images (its own order = input order) then padding:
    strip the padding and concatenate every image in input order."""
    pieces: dict[int, torch.Tensor] = {}
    for r in range(int(gathered.shape[0])):
        offset = 0
        for i in images_of_rank(owners, r):
            pieces[i] = gathered[r, offset : offset + sizes[i]]
            offset += sizes[i]
    return torch.cat([pieces[i] for i in range(len(sizes))])


def check_gathered(result: torch.Tensor, out: RankOutput) -> None:
    """The result has every image's rows, and this rank's images are its own rows,
    bit for bit (``torch.equal`` in BF16)."""
    if int(result.shape[0]) != sum(out.sizes):
        raise GatherError(f"gathered {int(result.shape[0])} patch rows, expected {sum(out.sizes)}")
    if out.tower is None:
        return
    starts = [sum(out.sizes[:i]) for i in range(len(out.sizes))]
    offset = 0
    for i in out.mine:
        n = out.sizes[i]
        if not torch.equal(result[starts[i] : starts[i] + n], out.tower[offset : offset + n]):
            raise GatherError(f"gathered rows of image {i} differ from its owner's output")
        offset += n
