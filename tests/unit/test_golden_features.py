"""The materializer against SHA-256 digests computed by the runtime's own functions on
the CPU (../shared/golden). Bit-exact: FP32 bytes and BF16 bytes viewed as int16."""

import hashlib
import json
import re

import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.materialize import materialize
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.pixels import stage_input
from tests.conftest import DATA, golden_images_dir

GOLDEN = json.loads((DATA / "expected_features.json").read_text())
IMAGES = golden_images_dir()
CASES = [(name, preset) for name in GOLDEN["images"] for preset in ("kimi-k3", "kimi-k2.5")]
needs_images = pytest.mark.skipif(IMAGES is None, reason="../shared/golden/images not found")


def digests(pv: torch.Tensor) -> tuple[str, str]:
    fp32 = hashlib.sha256(pv.contiguous().numpy().tobytes()).hexdigest()
    bf16 = hashlib.sha256(pv.to(torch.bfloat16).view(torch.int16).numpy().tobytes()).hexdigest()
    return fp32, bf16


@pytest.mark.parametrize("name", sorted(GOLDEN["images"]))
def test_golden_entry_is_consistent_with_our_plan(name):
    """Each entry (both presets) agrees with our resize plan for its stored size, and its
    shape, digests and values are well-formed: a wrong or truncated golden file fails here
    even without the images."""
    entry = GOLDEN["images"][name]
    w, h = entry["size"]
    assert set(entry) >= {"mode", "size", "kimi-k3", "kimi-k2.5"}
    for preset in ("kimi-k3", "kimi-k2.5"):
        want = entry[preset]
        plan = plan_resize(w, h, get_preset(preset))
        assert want["grid_thw"] == list(plan.grid_thw)
        assert want["shape"] == [plan.num_patches, 3, 14, 14]
        for key in ("sha256_fp32", "sha256_bf16"):
            assert re.fullmatch(r"[0-9a-f]{64}", want[key]), want[key]  # a SHA-256 hex digest
        # mean = std = 0.5 maps the 8-bit levels 0..255 onto k / 127.5 - 1 (up to FP32
        # rounding); resized and composited pixels are rounded/floored to such levels too
        assert len(want["first_values"]) == 4
        for v in want["first_values"]:
            level = (v + 1.0) * 127.5
            assert 0 <= round(level) <= 255 and abs(level - round(level)) < 1e-3, v
        assert abs(want["sum_fp64"]) <= plan.num_patches * 3 * 14 * 14


@needs_images
def test_golden_images_match_their_entries():
    """The 13 images on disk are exactly the entries, with the stored mode and size."""
    assert IMAGES is not None
    assert sorted(p.name for p in IMAGES.iterdir()) == sorted(GOLDEN["images"])
    assert len(GOLDEN["images"]) == 13
    for name, entry in GOLDEN["images"].items():
        with Image.open(IMAGES / name) as img:
            assert (img.mode, list(img.size)) == (entry["mode"], entry["size"]), name


@needs_images
@pytest.mark.parametrize(("name", "preset"), CASES)
@pytest.mark.slow
def test_features_match_runtime_digests(name, preset):
    assert IMAGES is not None
    want = GOLDEN["images"][name][preset]
    cfg = get_preset(preset)
    img = Image.open(IMAGES / name)
    plan = plan_resize(*img.size, cfg)
    batch = materialize([stage_input(img, cfg)], [plan], cfg)
    assert list(plan.grid_thw) == want["grid_thw"]
    assert list(batch.pixel_values.shape) == want["shape"]
    fp32, bf16 = digests(batch.pixel_values)
    assert fp32 == want["sha256_fp32"]
    assert bf16 == want["sha256_bf16"]
    assert batch.pixel_values.flatten()[:4].tolist() == want["first_values"]


@needs_images
def test_batched_equals_alone_for_same_group():
    """Two images with one plan, materialized together, equal each alone (bitwise)."""
    assert IMAGES is not None
    cfg = get_preset("kimi-k3")
    img = Image.open(IMAGES / "rgb_640x480.png")
    chw = stage_input(img, cfg)
    flipped = chw.flip(-1).contiguous()
    plan = plan_resize(640, 480, cfg)
    both = materialize([chw, flipped], [plan, plan], cfg).split()
    assert torch.equal(both[0], materialize([chw], [plan], cfg).pixel_values)
    assert torch.equal(both[1], materialize([flipped], [plan], cfg).pixel_values)
