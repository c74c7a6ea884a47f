"""The NaViT resize plan: pure integer/float arithmetic on width and height (SPEC section 3).

The float operations run in exactly the runtime's order so that sizes which land on
``x.99999...`` truncate the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kimi_bench.domain.config import PreprocessConfig


@dataclass(frozen=True)
class ResizePlan:
    width: int
    height: int
    new_width: int
    new_height: int
    pad_width: int
    pad_height: int
    num_tokens: int
    patch_size: int

    @property
    def padded_width(self) -> int:
        return self.new_width + self.pad_width

    @property
    def padded_height(self) -> int:
        return self.new_height + self.pad_height

    @property
    def grid_thw(self) -> tuple[int, int, int]:
        p = self.patch_size
        return (1, self.padded_height // p, self.padded_width // p)

    @property
    def num_patches(self) -> int:
        t, h, w = self.grid_thw
        return t * h * w

    @property
    def needs_resize(self) -> bool:
        return (self.new_width, self.new_height) != (self.width, self.height)

    @property
    def group_key(self) -> tuple[int, int, int, int]:
        """Images that share this key are materialized in one batch (SPEC section 5)."""
        return (self.new_height, self.new_width, self.padded_height, self.padded_width)

    def resize_config(self) -> dict[str, int]:
        return {
            "num_tokens": self.num_tokens,
            "new_width": self.new_width,
            "new_height": self.new_height,
            "pad_width": self.pad_width,
            "pad_height": self.pad_height,
        }


def plan_resize(width: int, height: int, cfg: PreprocessConfig) -> ResizePlan:
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    p = cfg.patch_size
    side = cfg.patch_limit_on_one_side
    s1 = math.sqrt(cfg.in_patch_limit / (max(1, width // p) * max(1, height // p)))
    s2 = side * p / width
    s3 = side * p / height
    scale = min(1.0, s1, s2, s3)
    new_w = min(max(1, int(width * scale)), side * p)
    new_h = min(max(1, int(height * scale)), side * p)
    f = cfg.merge_kernel_size * p
    pad_w = (f - new_w % f) % f
    pad_h = (f - new_h % f) % f
    if cfg.fixed_output_tokens is not None:
        tokens = cfg.fixed_output_tokens
    else:
        tokens = ((new_h + pad_h) // f) * ((new_w + pad_w) // f)
    return ResizePlan(width, height, new_w, new_h, pad_w, pad_h, tokens, p)
