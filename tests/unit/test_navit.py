import csv

import pytest

from kimi_bench.domain.config import PreprocessConfig, get_preset
from kimi_bench.domain.navit import plan_resize
from tests.conftest import DATA


def test_every_golden_plan_matches_to_the_integer():
    rows = list(csv.DictReader((DATA / "navit_plans.csv").open()))
    assert len(rows) > 1000
    mismatches = []
    for r in rows:
        p = plan_resize(int(r["width"]), int(r["height"]), get_preset(r["preset"]))
        got = (p.new_width, p.new_height, p.pad_width, p.pad_height, p.num_tokens)
        want = tuple(
            int(r[k]) for k in ("new_width", "new_height", "pad_width", "pad_height", "num_tokens")
        )
        if got != want:
            mismatches.append((r["preset"], r["width"], r["height"], got, want))
    assert mismatches == []


def test_truncation_case_11774x138():
    # 11774 * (512 * 14 / 11774) == 7167.999999999999 in Python floats: int() gives 7167.
    p = plan_resize(11774, 138, get_preset("kimi-k3"))
    assert (p.new_width, p.new_height) == (7167, 84)
    assert (p.pad_width, p.pad_height) == (1, 0)
    assert p.num_tokens == 3 * 256
    assert p.grid_thw == (1, 6, 512)


@pytest.mark.parametrize(
    ("w", "h", "expect"),
    [
        # no resize; pad to multiples of 28
        (640, 480, (640, 480, 4, 24, 23 * 18)),  # 644/28 x 504/28
        (448, 448, (448, 448, 0, 0, 16 * 16)),
        (1, 1, (1, 1, 27, 27, 1)),
        # K3 side cap: 8000 > 7168 -> scale 0.896, 50 * 0.896 = 44.8 -> 44
        (8000, 50, (7168, 44, 0, 12, 256 * 2)),
    ],
)
def test_hand_computed_plans_k3(w, h, expect):
    p = plan_resize(w, h, get_preset("kimi-k3"))
    assert (p.new_width, p.new_height, p.pad_width, p.pad_height, p.num_tokens) == expect


def test_k25_patch_limit_downscales_4096x3072():
    # s1 = sqrt(16384 / (292 * 219)) = 0.50614...; 4096 * s1 = 2073.1 -> 2073
    p = plan_resize(4096, 3072, get_preset("kimi-k2.5"))
    assert (p.new_width, p.new_height) == (2073, 1554)
    assert p.num_patches <= 16384 + 2 * (p.padded_width + p.padded_height)


def test_fixed_output_tokens_and_no_upscale():
    cfg = PreprocessConfig(name="t", fixed_output_tokens=7)
    p = plan_resize(20, 10, cfg)
    assert p.num_tokens == 7
    assert (p.new_width, p.new_height) == (20, 10)


def test_rejects_empty_size():
    with pytest.raises(ValueError):
        plan_resize(0, 10, get_preset("kimi-k3"))


def test_plan_can_exceed_the_patch_limit_like_the_runtime():
    # found by the property test: the limit is applied to the source's floored grid
    p = plan_resize(1024, 3154, get_preset("kimi-k2.5"))
    assert (p.new_width, p.new_height) == (1022, 3150)
    assert (p.new_width // 14) * (p.new_height // 14) == 16425 > 16384
    assert p.num_patches == 74 * 226
