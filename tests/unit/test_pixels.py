import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import BackgroundConfig, ConfigError, get_preset
from kimi_bench.domain.pixels import (
    StagingError,
    composite_alpha,
    make_background,
    normalization_tensors,
    pil_has_alpha,
    raw_channels,
    stage_input,
    tensor_to_chw,
)

K3 = get_preset("kimi-k3")
K25 = get_preset("kimi-k2.5")


def test_alpha_rule():
    assert pil_has_alpha(Image.new("RGBA", (2, 2)))
    assert pil_has_alpha(Image.new("LA", (2, 2)))
    assert not pil_has_alpha(Image.new("RGB", (2, 2)))
    assert not pil_has_alpha(Image.new("L", (2, 2)))
    p = Image.new("P", (2, 2))
    assert not pil_has_alpha(p)
    p.info["transparency"] = 0
    assert pil_has_alpha(p)


def test_stage_pil_modes_k3_vs_k25():
    rgba = Image.new("RGBA", (5, 3), (10, 20, 30, 40))
    t = stage_input(rgba, K3)
    assert t.dtype == torch.uint8 and t.shape == (4, 3, 5)
    assert t[:, 0, 0].tolist() == [10, 20, 30, 40]
    t25 = stage_input(rgba, K25)  # K2.5 converts every image to RGB
    assert t25.shape == (3, 3, 5) and t25[:, 2, 4].tolist() == [10, 20, 30]
    grey = stage_input(Image.new("L", (4, 2), 77), K3)
    assert grey.shape == (3, 2, 4) and grey.unique().tolist() == [77]


def test_tensor_staging_rules():
    two_d = torch.arange(6, dtype=torch.uint8).reshape(2, 3)
    out = tensor_to_chw(two_d)
    assert out.shape == (3, 2, 3) and torch.equal(out[0], out[2])
    assert out.dtype == torch.uint8 and torch.equal(out[1], two_d)
    one = tensor_to_chw(torch.full((1, 2, 2), 9, dtype=torch.uint8))
    assert one.dtype == torch.uint8 and one.shape == (3, 2, 2)
    assert torch.equal(one, torch.full((3, 2, 2), 9, dtype=torch.uint8))  # repeated to RGB
    with pytest.raises(StagingError, match="looks like HWC"):
        tensor_to_chw(torch.zeros((48, 64, 3), dtype=torch.uint8))
    with pytest.raises(StagingError, match=r"needs torch\.uint8"):
        tensor_to_chw(torch.zeros((3, 8, 8), dtype=torch.float32))
    with pytest.raises(StagingError, match="1, 3 or 4 channels"):
        tensor_to_chw(torch.zeros((5, 8, 9), dtype=torch.uint8))
    # eager staging accepts float tensors
    assert tensor_to_chw(torch.zeros((3, 8, 8)), require_uint8=False).dtype == torch.float32


def test_raw_channels_rule():
    assert raw_channels(Image.new("RGBA", (2, 2))) == 4
    assert raw_channels(Image.new("CMYK", (2, 2))) == 3
    assert raw_channels(torch.zeros((2, 2), dtype=torch.uint8)) == 3
    assert raw_channels(torch.zeros((1, 2, 2), dtype=torch.uint8)) == 3
    assert raw_channels(torch.zeros((4, 2, 2), dtype=torch.uint8)) == 4


def test_chessboard_values_at_known_coordinates():
    bg = make_background(BackgroundConfig(), 20, 20)  # square 8, white 255, gray 180
    assert bg.shape == (3, 20, 20) and bg.dtype == torch.float32
    assert bg[0, 0, 0] == 255 and bg[0, 7, 7] == 255  # top-left square is white
    assert bg[0, 0, 8] == 180 and bg[0, 8, 0] == 180
    assert bg[0, 8, 8] == 255 and bg[2, 16, 8] == 180
    flipped = make_background(BackgroundConfig(chessboard_square_on_top_left=False), 9, 9)
    assert flipped[1, 0, 0] == 180 and flipped[1, 0, 8] == 255
    assert make_background(BackgroundConfig(pattern="gray"), 2, 2).unique().tolist() == [128.0]


def test_composite_pixel_values():
    x = torch.zeros((1, 4, 1, 9))
    x[0, :3] = 100.0
    x[0, 3, 0, 0] = 255.0  # opaque -> rgb
    x[0, 3, 0, 1] = 0.0  # transparent -> background (white at x=1)
    x[0, 3, 0, 8] = 0.0  # transparent -> background (gray at x=8)
    x[0, 3, 0, 2] = 128.0  # a = 128/255: 100a + 255(1-a) = 177.2 -> floor 177
    out = composite_alpha(x, BackgroundConfig())
    assert out.shape == (1, 3, 1, 9)
    assert out[0, :, 0, 0].tolist() == [100.0] * 3
    assert out[0, :, 0, 1].tolist() == [255.0] * 3
    assert out[0, :, 0, 8].tolist() == [180.0] * 3
    assert out[0, :, 0, 2].tolist() == [177.0] * 3
    assert composite_alpha(x, None).shape == (1, 3, 1, 9)  # no config: alpha dropped


def test_normalization_tensors():
    scale, bias = normalization_tensors(K3)
    assert scale.shape == (1, 3, 1, 1) and scale.dtype == torch.float32
    assert scale.flatten().tolist() == [np.float32(1 / 127.5)] * 3
    assert bias.flatten().tolist() == [-1.0] * 3


def test_bad_background_pattern():
    with pytest.raises(ConfigError, match="unknown background pattern"):
        BackgroundConfig(pattern="stripes")
