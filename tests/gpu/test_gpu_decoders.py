"""GPU-only: the runtime's JPEG decoders on CUDA (``pytest -m gpu`` on a CUDA machine with
``nvidia-nvimgcodec-cu12``/``-cu13`` and torchvision installed; each test skips, saying
why, when its decoder cannot run). What they must do is what the runtime's do: a CUDA
uint8 CHW tensor on the decoding GPU, 4:4:4 JPEGs identical to PIL, and the pipeline
bit-exact between eager and deferred-decode under the same decoder."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.decoders import DeviceImage, choose
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.runtime import get_profile
from kimi_bench.pipeline import run_arm

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
K3 = get_preset("kimi-k3")
DECODERS = ("nvimgcodec", "nvjpeg")


def _usable(name: str) -> None:
    choice = choose(name, get_profile(None), CUDA)
    if choice.chosen.name != name:
        pytest.skip(choice.reason)


def _photo(size=(1536, 1024)) -> Image.Image:
    g = Image.radial_gradient("L").resize(size)
    return Image.merge("RGB", (g, g.rotate(90), g.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))


def _jpeg(im: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", **kw)
    return buf.getvalue()


@pytest.mark.parametrize("name", DECODERS)
def test_a_gpu_decode_is_a_cuda_uint8_chw_tensor(name: str) -> None:
    _usable(name)
    choice = choose(name, get_profile(None), CUDA)
    got = choice.decode(_jpeg(_photo((320, 200)), quality=85), CUDA)
    assert isinstance(got.image, DeviceImage) and got.decoder.name == name
    t = got.image.tensor
    assert t.is_cuda and t.dtype == torch.uint8 and tuple(t.shape) == (3, 200, 320)


@pytest.mark.parametrize("name", DECODERS)
def test_444_jpegs_decode_as_pil_does(name: str) -> None:
    _usable(name)
    data = _jpeg(_photo((320, 200)), quality=95, subsampling=0)
    got = choose(name, get_profile(None), CUDA).decode(data, CUDA).image
    pil = torch.from_numpy(np.array(Image.open(io.BytesIO(data)).convert("RGB")))
    assert torch.equal(got.tensor.cpu(), pil.permute(2, 0, 1).contiguous())


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("progressive", [False, True])
def test_deferred_decode_is_bit_exact_to_eager_under_the_same_decoder(
    name: str, progressive: bool
) -> None:
    _usable(name)
    datas = [_jpeg(_photo(), quality=85, progressive=progressive) for _ in range(2)]
    choice = choose(name, get_profile(None), CUDA)
    decoded = [choice.decode(d, CUDA).image for d in datas]
    plans = [plan_resize(im.width, im.height, K3) for im in decoded]
    eager = run_arm("eager", decoded, plans, K3, 2, CUDA, CUDA, decoder=name)
    arm = run_arm("deferred-decode", [EncodedImage(d) for d in datas], plans, K3, 2, CUDA, CUDA,
                  decoder=name)  # fmt: skip
    assert all(d.encoded for d in arm.decisions)
    assert all(torch.equal(a, b) for a, b in zip(eager.fp32, arm.fp32, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(eager.bf16, arm.bf16, strict=True))
