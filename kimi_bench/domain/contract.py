"""The uint8 data contract between the producer (tokenizer worker) and the consumer
(vision owner): the multimodal item, the deferred-preprocessing record, and a mechanical
producer/consumer key audit (SPEC section 4).

The audit exists because of a real regression: the consumer read ``record["backend"]``,
a key the producer never wrote, and warmup crashed with ``KeyError: 'backend'``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from kimi_bench.domain.config import BackgroundConfig, PreprocessConfig
from kimi_bench.domain.navit import ResizePlan, plan_resize

DEFERRED_KEY = "kimi_k3_deferred_preprocessing"
GRID_KEY = "image_grid_thw"
# deferred-decode arm (proposed, not in the runtime): the feature is the image's encoded
# bytes (1-D uint8) and this record holds the header the producer planned from
ENCODED_KEY = "kimi_bench_encoded_image"


class ContractError(ValueError):
    """An item or record that breaks the producer/consumer contract."""


class FrozenRecord(Mapping[str, Any]):
    """A read-only, picklable mapping (``MappingProxyType`` cannot be pickled)."""

    __slots__ = ("_data",)
    _data: dict[str, Any]

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", dict(data))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FrozenRecord is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenRecord, (self._data,))

    def __repr__(self) -> str:
        return f"FrozenRecord({self._data!r})"


def make_deferred_record(
    plan: ResizePlan, cfg: PreprocessConfig, backend: str = "gpu"
) -> Mapping[str, Any]:
    """Producer side: the immutable record that travels with a deferred uint8 image."""
    return FrozenRecord(
        {
            "backend": backend,
            "image_mean": tuple(cfg.image_mean),
            "image_std": tuple(cfg.image_std),
            "transparent_bg_config": (
                FrozenRecord(cfg.transparent_bg.as_dict()) if cfg.transparent_bg else None
            ),
            "resize_config": FrozenRecord(plan.resize_config()),
        }
    )


@dataclass(frozen=True)
class DeferredSpec:
    """What the consumer needs, read back out of a record."""

    backend: str
    cfg: PreprocessConfig
    plan: ResizePlan


def read_deferred_record(
    record: Mapping[str, Any], width: int, height: int, base: PreprocessConfig
) -> DeferredSpec:
    """Consumer side: rebuild the config and plan the owner materializes with.

    ``base`` provides only the patch size and limits; mean, std, background and the
    resize plan come from the record, as in the runtime.
    """
    backend = record["backend"]
    if backend not in ("gpu", "cpu"):
        raise ContractError(f"unknown deferred backend {backend!r}")
    bg_raw = record["transparent_bg_config"]
    bg = BackgroundConfig(**dict(bg_raw)) if bg_raw is not None else None
    rc = record["resize_config"]
    cfg = PreprocessConfig(
        name=base.name,
        patch_size=base.patch_size,
        merge_kernel_size=base.merge_kernel_size,
        in_patch_limit=base.in_patch_limit,
        patch_limit_on_one_side=base.patch_limit_on_one_side,
        fixed_output_tokens=base.fixed_output_tokens,
        image_mean=tuple(record["image_mean"]),
        image_std=tuple(record["image_std"]),
        transparent_bg=bg,
    )
    plan = ResizePlan(
        width=width,
        height=height,
        new_width=int(rc["new_width"]),
        new_height=int(rc["new_height"]),
        pad_width=int(rc["pad_width"]),
        pad_height=int(rc["pad_height"]),
        num_tokens=int(rc["num_tokens"]),
        patch_size=base.patch_size,
    )
    return DeferredSpec(backend=str(backend), cfg=cfg, plan=plan)


@dataclass
class MMItem:
    """One multimodal item = one image. ``feature`` is uint8 CHW (deferred) or FP32
    patches (eager); ``model_specific_data`` carries the grid and, if deferred, the record."""

    feature: torch.Tensor
    model_specific_data: dict[str, Any] = field(default_factory=dict)

    @property
    def is_deferred(self) -> bool:
        return DEFERRED_KEY in self.model_specific_data

    @property
    def is_encoded(self) -> bool:
        """Deferred, and still encoded: the owner decodes it before anything else."""
        return ENCODED_KEY in self.model_specific_data

    @property
    def grid_thw(self) -> tuple[int, int, int]:
        grid = self.model_specific_data.get(GRID_KEY)
        if not isinstance(grid, torch.Tensor) or grid.dtype != torch.int64:
            raise ContractError(f"{GRID_KEY} must be an int64 tensor, got {type(grid).__name__}")
        if grid.shape != (1, 3):
            raise ContractError(
                f"an item carries exactly one image: {GRID_KEY} must have shape (1, 3), "
                f"got {tuple(grid.shape)}"
            )
        t, h, w = (int(v) for v in grid[0].tolist())
        return (t, h, w)

    @property
    def num_patches(self) -> int:
        t, h, w = self.grid_thw
        return t * h * w

    def validate(self, require_cpu: bool = True) -> None:
        """Check the item against the contract. ``require_cpu=False`` on the owner, where a
        deferred uint8 feature may already have been copied to the device."""
        grid = self.grid_thw
        if self.is_encoded:
            f = self.feature
            if not self.is_deferred or f.dtype != torch.uint8 or f.dim() != 1:
                raise ContractError(
                    "an encoded item must be deferred and carry its bytes as a 1-D uint8 "
                    f"tensor, got {f.dtype} {tuple(f.shape)}"
                )
        elif self.is_deferred:
            f = self.feature
            on_cpu = f.device.type == "cpu" or not require_cpu
            if f.dtype != torch.uint8 or f.dim() != 3 or not on_cpu:
                raise ContractError(
                    "a deferred item's feature must be a CPU uint8 CHW tensor, got "
                    f"{f.dtype} {tuple(f.shape)} on {f.device}"
                )
        else:
            f = self.feature
            n = grid[0] * grid[1] * grid[2]
            if f.dim() != 4 or f.shape[0] != n or f.dtype != torch.float32:
                raise ContractError(
                    f"an eager item's feature must be FP32 patches ({n}, 3, p, p), got "
                    f"{f.dtype} {tuple(f.shape)}"
                )


def grid_tensor(plan: ResizePlan) -> torch.Tensor:
    return torch.tensor([list(plan.grid_thw)], dtype=torch.int64)


class _RecordingMapping(Mapping[str, Any]):
    """A read-only view that remembers every key looked up, found or not."""

    def __init__(self, inner: Mapping[str, Any], prefix: str = "") -> None:
        self._inner = inner
        self._prefix = prefix
        self.read: set[str] = set()
        self.children: list[_RecordingMapping] = []

    def __getitem__(self, key: str) -> Any:
        self.read.add(self._prefix + key)
        value = self._inner[key]
        if isinstance(value, Mapping):
            child = _RecordingMapping(value, prefix=f"{self._prefix}{key}.")
            self.children.append(child)
            return child
        return value

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)

    def all_read(self) -> set[str]:
        out = set(self.read)
        for c in self.children:
            out |= c.all_read()
        return out


def _flat_keys(m: Mapping[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for k, v in m.items():
        keys.add(prefix + k)
        if isinstance(v, Mapping):
            keys |= _flat_keys(v, prefix=f"{prefix}{k}.")
    return keys


@dataclass(frozen=True)
class AuditResult:
    written: tuple[str, ...]
    read: tuple[str, ...]
    missing: tuple[str, ...]  # read by the consumer, never written by the producer
    unused: tuple[str, ...]  # written by the producer, never read

    @property
    def ok(self) -> bool:
        return not self.missing

    def summary(self) -> dict[str, Any]:
        return {"ok": self.ok, "missing": list(self.missing), "unused": list(self.unused)}


def audit_contract(
    cfg: PreprocessConfig,
    producer: Callable[[ResizePlan, PreprocessConfig], Mapping[str, Any]] = make_deferred_record,
    consumer: Callable[..., Any] = read_deferred_record,
    sizes: tuple[tuple[int, int], ...] = ((640, 480), (57, 29), (8000, 50)),
) -> AuditResult:
    """Run the producer, hand its record to the consumer through a recording view, and
    list every key the consumer asked for that the producer did not write."""
    written: set[str] = set()
    read: set[str] = set()
    missing: set[str] = set()
    for w, h in sizes:
        plan = plan_resize(w, h, cfg)
        record = producer(plan, cfg)
        written |= _flat_keys(record)
        view = _RecordingMapping(record)
        try:
            consumer(view, w, h, cfg)
        except KeyError as exc:
            missing.add(str(exc.args[0]) if exc.args else "?")
        read |= view.all_read()
    missing |= {k for k in read if k not in written}
    unused = {k for k in written if k not in read and not any(r.startswith(k + ".") for r in read)}
    return AuditResult(
        tuple(sorted(written)), tuple(sorted(read)), tuple(sorted(missing)), tuple(sorted(unused))
    )
