"""GPU-only: the CUDA materializer. Run with ``pytest -m gpu`` on a CUDA machine."""

import json

import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.corpus import builtin_corpus
from kimi_bench.domain.materialize import materialize
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.pixels import input_size, stage_input
from kimi_bench.pipeline import run_deferred, run_eager
from tests.conftest import DATA, golden_images_dir
from tests.unit.test_golden_features import digests

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")


def test_eager_and_deferred_identical_on_cuda():
    cfg = get_preset("kimi-k3")
    objs = [e.load() for e in builtin_corpus(cfg)[:20]]
    plans = [plan_resize(*input_size(o), cfg) for o in objs]
    eager = run_eager(objs, plans, cfg, 4, CUDA, CUDA)
    deferred = run_deferred(objs, plans, cfg, 4, CUDA, CUDA)
    names = [e.name for e in builtin_corpus(cfg)[:20]]
    differ = [
        (n, float((a - b).abs().max()))
        for n, a, b in zip(names, eager.fp32, deferred.fp32, strict=True)
        if not torch.equal(a, b)
    ]
    assert differ == []
    assert all(torch.equal(a, b) for a, b in zip(eager.bf16, deferred.bf16, strict=True))


def test_rgb_cuda_matches_cpu_golden_digest():
    images = golden_images_dir()
    if images is None:
        pytest.skip("golden images not found")
    golden = json.loads((DATA / "expected_features.json").read_text())["images"]
    cfg = get_preset("kimi-k3")
    for name in ("rgb_640x480.png", "rgb_57x29.png", "texture_4000x3000.jpg"):
        img = Image.open(images / name)
        batch = materialize([stage_input(img, cfg)], [plan_resize(*img.size, cfg)], cfg, CUDA)
        assert digests(batch.pixel_values.cpu())[0] == golden[name]["kimi-k3"]["sha256_fp32"]
