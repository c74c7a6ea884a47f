"""The materializer: resize -> composite -> pad -> normalize -> patchify (SPEC section 5).

The same functions serve both arms: the eager producer runs them before transport, the
deferred owner runs them after owner assignment. ``device`` decides CPU or CUDA.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.contract import (
    DEFERRED_KEY,
    GRID_KEY,
    ContractError,
    MMItem,
    read_deferred_record,
)
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.pixels import composite_alpha, normalization_tensors


@dataclass
class MaterializedBatch:
    """FP32 ``pixel_values`` (sum of patches, 3, p, p) and int64 ``grid_thws`` (n, 3)."""

    pixel_values: torch.Tensor
    grid_thws: torch.Tensor

    def patch_counts(self) -> list[int]:
        return [int(t * h * w) for t, h, w in self.grid_thws.tolist()]

    def split(self) -> list[torch.Tensor]:
        return list(torch.split(self.pixel_values, self.patch_counts()))


def resize_batch(x: torch.Tensor, new_h: int, new_w: int) -> torch.Tensor:
    """Bicubic, antialiased resize of a float32 batch, rounded half-to-even and clamped."""
    if (x.shape[2], x.shape[3]) == (new_h, new_w):
        return x
    y = F.interpolate(x, size=(new_h, new_w), mode="bicubic", align_corners=False, antialias=True)
    return torch.clamp(torch.round(y), 0, 255)


def pad_normalize_patchify(
    x: torch.Tensor, plan: ResizePlan, scale: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """(B, 3, new_h, new_w) float32 -> (B * gh * gw, 3, p, p) float32."""
    if plan.pad_width or plan.pad_height:
        x = F.pad(x, (0, plan.pad_width, 0, plan.pad_height), value=0.0)
    x = torch.addcmul(bias, x, scale)
    b, c, h, w = x.shape
    p = plan.patch_size
    gh, gw = h // p, w // p
    x = x.reshape(b, c, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b * gh * gw, c, p, p)


def materialize(
    images: Sequence[torch.Tensor],
    plans: Sequence[ResizePlan],
    cfg: PreprocessConfig,
    device: torch.device | str = "cpu",
) -> MaterializedBatch:
    """Materialize CHW images (any real dtype, usually uint8 on the CPU) on ``device``.

    Images are grouped by their plan's (new_h, new_w, padded_h, padded_w); inside a group
    only images of identical source shape and dtype are resized in one call. The output
    keeps input order.
    """
    if len(images) != len(plans):
        raise ValueError(f"{len(images)} images but {len(plans)} plans")
    dev = torch.device(device)
    scale, bias = normalization_tensors(cfg, dev)
    groups: dict[tuple[int, int, int, int], list[int]] = {}
    for i, plan in enumerate(plans):
        groups.setdefault(plan.group_key, []).append(i)
    per_image: list[torch.Tensor | None] = [None] * len(images)
    for indices in groups.values():
        plan = plans[indices[0]]
        sub: dict[tuple[tuple[int, ...], torch.dtype], list[int]] = {}
        for i in indices:
            sub.setdefault((tuple(images[i].shape), images[i].dtype), []).append(i)
        resized: dict[int, torch.Tensor] = {}
        for members in sub.values():
            # each image goes to the device on its own (strides kept), batched there
            batch = torch.stack([images[i].to(dev, non_blocking=True) for i in members])
            x = resize_batch(batch.to(torch.float32), plan.new_height, plan.new_width)
            x = composite_alpha(x, cfg.transparent_bg)
            for j, i in enumerate(members):
                resized[i] = x[j]
        stacked = torch.stack([resized[i] for i in indices])
        patches = pad_normalize_patchify(stacked, plan, scale, bias)
        n = plan.num_patches
        for j, i in enumerate(indices):
            per_image[i] = patches[j * n : (j + 1) * n]
    pixel_values = torch.cat([t for t in per_image if t is not None], dim=0)
    grid = torch.tensor([list(p.grid_thw) for p in plans], dtype=torch.int64)
    return MaterializedBatch(pixel_values.contiguous(), grid)


def to_tower_buffer(
    features: Sequence[torch.Tensor],
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Cast per-image FP32 patches into one preallocated buffer of the tower dtype."""
    total = sum(int(f.shape[0]) for f in features)
    if not features:
        raise ValueError("no features to cast")
    ref = features[0]
    dev = torch.device(device) if device is not None else ref.device
    out = torch.empty((total, *ref.shape[1:]), dtype=dtype, device=dev)
    offset = 0
    for f in features:
        n = int(f.shape[0])
        out[offset : offset + n].copy_(f, non_blocking=True)
        offset += n
    return out


def materialize_items(
    items: Sequence[MMItem], base: PreprocessConfig, device: torch.device | str = "cpu"
) -> MaterializedBatch:
    """Owner-side: turn a batch of items into FP32 patches on ``device``, in input order.

    Deferred items (uint8 + record) are materialized here with the record's plan; eager
    items (FP32 patches) are only moved. A batch may mix both (per-image decisions, cache
    hits); the upstream PR raised ``ValueError`` on such a batch, this does not.
    """
    dev = torch.device(device)
    out: list[torch.Tensor | None] = [None] * len(items)
    deferred: dict[PreprocessConfig, list[tuple[int, torch.Tensor, ResizePlan]]] = {}
    for i, item in enumerate(items):
        item.validate(require_cpu=False)
        if item.is_deferred:
            h, w = int(item.feature.shape[1]), int(item.feature.shape[2])
            spec = read_deferred_record(item.model_specific_data[DEFERRED_KEY], w, h, base)
            if spec.plan.grid_thw != item.grid_thw:
                raise ContractError(
                    f"item {i}: grid_thw {item.grid_thw} disagrees with its record's plan "
                    f"{spec.plan.grid_thw}"
                )
            deferred.setdefault(spec.cfg, []).append((i, item.feature, spec.plan))
        else:
            out[i] = item.feature.to(dev, non_blocking=True)
    for cfg, members in deferred.items():
        batch = materialize([m[1] for m in members], [m[2] for m in members], cfg, dev)
        for (i, _, _), patches in zip(members, batch.split(), strict=True):
            out[i] = patches
    grids = torch.cat([item.model_specific_data[GRID_KEY] for item in items], dim=0)
    return MaterializedBatch(torch.cat([t for t in out if t is not None], dim=0), grids)
