"""Property-based tests of the core (hypothesis): for random inputs and configs, the
deferred arm's owner output equals the eager arm's bit for bit (torch.equal in FP32 and
after the BF16 cast), the policy's verdict follows its byte rule, and the resize plan stays
within its limits.

Inputs: every PIL mode the runtime meets (RGB, RGBA, LA, L, P with and without
transparency, 1, I;16, CMYK) and uint8 tensors (1, 3, 4 channels and 2-D), sizes from one
pixel to extreme aspect ratios, 1-3 images per request, 1-3 ranks; configs: both presets
and random valid checkpoint configs. Small patch budgets in the random configs put small
images on both sides of the byte heuristic (deferred: raw <= FP32 bytes; eager: raw >),
and explicit examples pin the presets' own boundary (28672 x 28 defers, 28673 x 28 not).
Images stay small so that ~1000 cases run in well under a minute on a CPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from kimi_bench.domain.config import (
    BACKGROUND_PATTERNS,
    BackgroundConfig,
    PreprocessConfig,
    get_preset,
)
from kimi_bench.domain.navit import ResizePlan, plan_resize
from kimi_bench.domain.policy import processed_bytes, raw_bytes
from kimi_bench.pipeline import run_deferred, run_eager

pytestmark = pytest.mark.slow  # 1350 generated cases, ~10 s: CI's full run

CPU = torch.device("cpu")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """These tensors are tiny: handing them between torch's threads costs more than the work
    (30x slower on a loaded 2-core machine). Both arms run with the same setting."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


PIL_MODES = ("RGB", "RGBA", "LA", "L", "P", "P+transparency", "P+alpha-table", "1", "I;16", "CMYK")
TENSOR_LAYOUTS = ("C1HW", "C3HW", "C4HW", "HW")


# --- strategies ------------------------------------------------------------------------

sides = st.integers(1, 48)
extreme = st.tuples(st.integers(1, 3), st.integers(120, 400))
sizes = st.one_of(
    st.tuples(sides, sides),
    extreme,
    extreme.map(lambda t: (t[1], t[0])),
)


@st.composite
def checkpoint_configs(draw: st.DrawFn) -> PreprocessConfig:
    """Random valid configs; small budgets so that tiny images get downscaled."""
    bg = draw(
        st.none()
        | st.builds(
            BackgroundConfig,
            pattern=st.sampled_from(BACKGROUND_PATTERNS),
            chessboard_square_size=st.integers(1, 16),
            chessboard_white_value=st.integers(0, 255),
            chessboard_gray_value=st.integers(0, 255),
            chessboard_square_on_top_left=st.booleans(),
        )
    )
    unit = st.floats(0.05, 0.95, allow_nan=False)
    return PreprocessConfig(
        name="random",
        patch_size=draw(st.integers(1, 16)),
        merge_kernel_size=draw(st.integers(1, 3)),
        in_patch_limit=draw(st.integers(1, 12) | st.integers(1, 600)),
        patch_limit_on_one_side=draw(st.integers(1, 6) | st.integers(1, 40)),
        fixed_output_tokens=draw(st.none() | st.integers(1, 4096)),
        image_mean=draw(st.tuples(unit, unit, unit)),
        image_std=draw(st.tuples(unit, unit, unit)),
        transparent_bg=bg,
    )


configs = st.one_of(
    st.sampled_from(["kimi-k3", "kimi-k2.5"]).map(get_preset),
    checkpoint_configs(),
)


def make_pil(mode: str, w: int, h: int, rng: np.random.Generator) -> Image.Image:
    def noise(c: int) -> bytes:
        return rng.integers(0, 256, size=(h, w, c), dtype=np.uint8).tobytes()

    if mode in ("RGB", "RGBA", "LA", "L", "CMYK"):
        return Image.frombytes(mode, (w, h), noise(len(mode) if mode != "L" else 1))
    if mode.startswith("P"):
        im = Image.frombytes("P", (w, h), noise(1))
        im.putpalette(rng.integers(0, 256, size=768, dtype=np.uint8).tobytes())
        if mode == "P+transparency":
            im.info["transparency"] = int(rng.integers(0, 256))
        elif mode == "P+alpha-table":  # PNG tRNS: one alpha per palette index
            im.info["transparency"] = rng.integers(0, 256, size=256, dtype=np.uint8).tobytes()
        return im
    if mode == "1":
        return Image.frombytes("L", (w, h), noise(1)).convert("1", dither=Image.Dither.NONE)
    if mode == "I;16":
        vals = rng.integers(0, 65536, size=(h, w), dtype=np.uint16)
        return Image.frombytes("I;16", (w, h), vals.astype("<u2").tobytes())
    raise AssertionError(mode)


def make_tensor(layout: str, w: int, h: int, rng: np.random.Generator) -> torch.Tensor:
    shape = (h, w) if layout == "HW" else (int(layout[1]), h, w)
    return torch.from_numpy(rng.integers(0, 256, size=shape, dtype=np.uint8))


@st.composite
def inputs(draw: st.DrawFn, kinds: tuple[str, ...]) -> Any:
    w, h = draw(sizes)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(kinds))
    if kind in TENSOR_LAYOUTS:
        return make_tensor(kind, w, h, rng)
    return make_pil(kind, w, h, rng)


# --- properties --------------------------------------------------------------------------


def check_plan(plan: ResizePlan, w: int, h: int, cfg: PreprocessConfig) -> None:
    p, f = cfg.patch_size, cfg.merge_kernel_size * cfg.patch_size
    side = cfg.patch_limit_on_one_side * p
    assert (plan.width, plan.height) == (w, h)
    assert 1 <= plan.new_width <= min(w, side) and 1 <= plan.new_height <= min(h, side)
    assert 0 <= plan.pad_width < f and 0 <= plan.pad_height < f
    assert plan.padded_width % f == 0 and plan.padded_height % f == 0
    t, gh, gw = plan.grid_thw
    assert (t, gh * p, gw * p) == (1, plan.padded_height, plan.padded_width)
    m = cfg.merge_kernel_size
    tokens = cfg.fixed_output_tokens or (gh // m) * (gw // m)
    assert plan.num_tokens == tokens
    # the patch budget holds up to the flooring of the source size (see
    # test_navit_properties) and the 1-pixel floor of each side: a side that scales below
    # one pixel stays one pixel, so a 1 x 120 image under a budget of 1 patch keeps 3
    s1 = math.sqrt(cfg.in_patch_limit / (max(1, w // p) * max(1, h // p)))
    budget_w, budget_h = max(w * s1, 1) / p, max(h * s1, 1) / p
    assert (plan.new_width // p) * (plan.new_height // p) <= budget_w * budget_h * (1 + 1e-9)


@settings(max_examples=650, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cfg=configs, size=st.one_of(sizes, st.tuples(st.integers(1, 60_000), st.integers(1, 60_000)))
)
def test_plan_stays_within_its_limits(cfg, size):
    w, h = size
    check_plan(plan_resize(w, h, cfg), w, h, cfg)


requests = {
    "cfg": configs,
    "ranks": st.integers(1, 3),
    "policy": st.sampled_from(["request", "image"]),
}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(images=st.lists(inputs(PIL_MODES), min_size=1, max_size=3), **requests)
@example(
    cfg=get_preset("kimi-k2.5"),
    images=[make_pil("RGB", 28673, 28, np.random.default_rng(1))],
    ranks=1,
    policy="image",
)
def test_eager_and_deferred_are_bit_identical_for_pil_modes(cfg, images, ranks, policy):
    check_arms(cfg, images, ranks, policy)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(images=st.lists(inputs(TENSOR_LAYOUTS), min_size=1, max_size=3), **requests)
@example(
    cfg=get_preset("kimi-k3"),
    images=[make_tensor("C3HW", 28672, 28, np.random.default_rng(0))],
    ranks=2,
    policy="request",
)
def test_eager_and_deferred_are_bit_identical_for_uint8_tensors(cfg, images, ranks, policy):
    check_arms(cfg, images, ranks, policy)


def check_arms(cfg: PreprocessConfig, images: list[Any], ranks: int, policy: str) -> None:
    plans = [plan_resize(*_size(o), cfg) for o in images]
    for o, plan in zip(images, plans, strict=True):
        check_plan(plan, *_size(o), cfg)
    eager = run_eager(images, plans, cfg, ranks, CPU, CPU)
    deferred = run_deferred(
        images, plans, cfg, ranks, CPU, CPU, policy=policy, images_per_request=len(images)
    )
    assert len(eager.fp32) == len(deferred.fp32) == len(images)
    for plan, e32, d32, e16, d16 in zip(
        plans, eager.fp32, deferred.fp32, eager.bf16, deferred.bf16, strict=True
    ):
        assert d32.dtype == torch.float32 and d16.dtype == torch.bfloat16
        assert tuple(d32.shape) == (plan.num_patches, 3, cfg.patch_size, cfg.patch_size)
        assert torch.equal(e32, d32)
        assert torch.equal(e16, d16)
    # the byte rule: defer exactly when the raw bytes do not exceed the FP32 bytes
    raws = [raw_bytes(o, p) for o, p in zip(images, plans, strict=True)]
    procs = [processed_bytes(p) for p in plans]
    for i, d in enumerate(deferred.decisions):
        raw, proc = (sum(raws), sum(procs)) if policy == "request" else (raws[i], procs[i])
        assert d.defer == (raw <= proc), (d, raw, proc)
        event("deferred" if d.defer else "eager (raw > FP32 bytes)")


def _size(obj: Any) -> tuple[int, int]:
    if isinstance(obj, Image.Image):
        return obj.size
    return int(obj.shape[-1]), int(obj.shape[-2])
