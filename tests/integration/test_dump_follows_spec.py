"""`parity --dump` on real photos, alpha PNGs and palette images: each dumped FP32 tensor
equals, bit for bit, a step-by-step transcription of SPEC section 5 written here
independently of kimi_bench.domain.materialize (same operations, same order)."""

import io
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.domain.corpus import package_photos


def spec_plan(w: int, h: int, p=14, m=2, limit=65536, side=512):
    s1 = math.sqrt(limit / (max(1, w // p) * max(1, h // p)))
    scale = min(1, s1, side * p / w, side * p / h)
    nw = min(max(1, int(w * scale)), side * p)
    nh = min(max(1, int(h * scale)), side * p)
    f = m * p
    return nw, nh, (f - nw % f) % f, (f - nh % f) % f


def spec_features(img: Image.Image) -> torch.Tensor:
    """K3: RGBA if the image has alpha, chessboard (8, 255/180, white top-left) after
    the resize, mean = std = 0.5."""
    has_alpha = img.mode != "RGB" and ("A" in img.getbands() or "transparency" in img.info)
    arr = np.array(img.convert("RGBA" if has_alpha else "RGB"))
    x = torch.from_numpy(arr).permute(2, 0, 1).unsqueeze(0).to(torch.float32)
    w, h = img.size
    nw, nh, pw, ph = spec_plan(w, h)
    if (h, w) != (nh, nw):
        x = F.interpolate(x, size=(nh, nw), mode="bicubic", align_corners=False, antialias=True)
        x = torch.clamp(torch.round(x), 0, 255)
    if x.shape[1] == 4:
        yy = torch.arange(nh)[:, None] // 8
        xx = torch.arange(nw)[None, :] // 8
        plane = torch.where((yy + xx) % 2 == 1, torch.tensor(180.0), torch.tensor(255.0))
        bg = plane.expand(3, nh, nw)
        alpha = torch.clamp(x[:, 3:4] / 255.0, 0, 1)
        x = torch.floor(torch.clamp(alpha * x[:, :3] + (1.0 - alpha) * bg, 0, 255))
    x = F.pad(x, (0, pw, 0, ph), value=0.0)
    scale = torch.tensor([1.0 / (255.0 * 0.5)] * 3, dtype=torch.float32).view(1, 3, 1, 1)
    bias = torch.tensor([-0.5 / 0.5] * 3, dtype=torch.float32).view(1, 3, 1, 1)
    x = torch.addcmul(bias, x, scale)
    b, c, hh, ww = x.shape
    x = x.reshape(b, c, hh // 14, 14, ww // 14, 14).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(-1, c, 14, 14)


@pytest.mark.slow
def test_dumps_follow_spec_section_5_bit_for_bit(tmp_path: Path):
    photos = package_photos()
    if len(photos) < 3:
        pytest.skip("needs the sample photos of matplotlib and scikit-learn ([plot,photos])")
    d = tmp_path / "imgs"
    d.mkdir()
    for e in photos:
        shutil.copy(_photo_path(e.name), d)
    rng = np.random.default_rng(1)
    big = Image.open(d / "china.jpg").resize((3000, 2000))  # forces a K3 downscale
    big.save(d / "china_big.jpg", quality=90)
    rgba = np.array(Image.open(d / "flower.jpg").convert("RGBA"))
    rgba[..., 3] = np.linspace(0, 255, rgba.shape[1], dtype=np.uint8)[None, :]
    Image.fromarray(rgba).save(d / "flower_alpha.png")
    Image.fromarray(rgba).resize((7600, 1200)).save(d / "flower_alpha_big.png")
    pal = Image.open(d / "grace_hopper.jpg").quantize(32)
    pal.save(d / "hopper_palette.png", transparency=5)
    pal.save(d / "hopper_palette_opaque.png")
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (33, 47, 2), dtype=np.uint8), "LA").save(buf, "PNG")
    (d / "la.png").write_bytes(buf.getvalue())

    dump = tmp_path / "dump"
    res = CliRunner().invoke(
        app,
        [
            "parity",
            "--images",
            str(d),
            "--dump",
            str(dump),
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 0, res.output
    files = sorted(d.iterdir())
    assert len(files) == 9
    for f in files:
        dumped = torch.load(dump / f"{f.name}.pt")
        want = spec_features(Image.open(f))
        assert dumped["deferred"].dtype == torch.float32
        assert torch.equal(dumped["deferred"], want), f.name
        assert torch.equal(dumped["eager"], want), f.name


def _photo_path(name: str) -> Path:
    for e in package_photos():
        if e.name == name:
            return Path(e.load().filename)
    raise FileNotFoundError(name)
