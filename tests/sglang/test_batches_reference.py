"""Batching and policy settings against the runtime: grouped materialization (same target
size, same and different source shapes, mixed alpha), per-request and per-image
decisions, and transports or owners that keep images eager."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.corpus import CorpusEntry
from kimi_bench.sglang_ref import Runtime, first_difference, reference_rows

pytestmark = pytest.mark.sglang


def _pil(seed: int, w: int, h: int, mode: str) -> Callable[[], Any]:
    channels = len(mode)

    def make() -> Image.Image:
        arr = np.random.default_rng(seed).integers(0, 256, (h, w, channels), dtype=np.uint8)
        return Image.frombytes(mode, (w, h), arr.tobytes())

    return make


def _tensor(seed: int, shape: tuple[int, ...]) -> Callable[[], Any]:
    return lambda: torch.from_numpy(
        np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    )


def _batch() -> list[CorpusEntry]:
    """Eight inputs in two NaViT target groups: 700x500 (three identical sources, one
    RGBA, one CHW tensor) and 28x28 (an exact multiple beside a 29x29 that resizes
    nowhere but pads), so resizes batch only equal (shape, dtype) sources."""
    g = "generated"
    return [
        CorpusEntry("rgb_a_700x500", g, _pil(1, 700, 500, "RGB")),
        CorpusEntry("rgb_b_700x500", g, _pil(2, 700, 500, "RGB")),
        CorpusEntry("rgba_700x500", g, _pil(3, 700, 500, "RGBA")),
        CorpusEntry("rgb_c_700x500", g, _pil(4, 700, 500, "RGB")),
        CorpusEntry("tensor_700x500", g, _tensor(5, (3, 500, 700))),
        CorpusEntry("rgb_28x28", g, _pil(6, 28, 28, "RGB")),
        CorpusEntry("rgb_20x27", g, _pil(7, 20, 27, "RGB")),
        CorpusEntry("rgba_28x28", g, _pil(8, 28, 28, "RGBA")),
    ]


@pytest.mark.parametrize("preset", ["kimi-k3", "kimi-k2.5"])
@pytest.mark.parametrize("batch_size", [1, 8])
def test_grouped_batches_identical(rt: Runtime, preset: str, batch_size: int) -> None:
    cfg = get_preset(preset)
    rows = reference_rows(_batch(), cfg, "cpu", batch_size=batch_size, runtime=rt)
    assert first_difference(rows) is None
    assert all(r["reference_eager_bf16_equal"] and r["reference_deferred_bf16_equal"] for r in rows)


@pytest.mark.parametrize(("policy", "per_request"), [("request", 3), ("image", 3), ("request", 9)])
def test_decision_scopes_identical(rt: Runtime, policy: Any, per_request: int) -> None:
    cfg = get_preset("kimi-k3")
    # wide and short: raw bytes exceed its FP32 patches, so on its own it stays eager
    wide = CorpusEntry("wide_40000x28", "generated", _pil(9, 40000, 28, "RGB"))
    entries = [*_batch(), wide]
    rows = reference_rows(
        entries, cfg, "cpu", policy=policy, images_per_request=per_request, runtime=rt
    )
    assert all(r["reference_decision_equal"] for r in rows), first_difference(rows)
    assert rows[-1]["reference_defer"] is (policy == "request" and per_request == 9)


@pytest.mark.parametrize(
    ("transport", "owner_cuda"), [("cuda_ipc", True), ("cuda_vmm", True), ("cpu", False)]
)
def test_eager_only_settings_identical(rt: Runtime, transport: str, owner_cuda: bool) -> None:
    cfg = get_preset("kimi-k3")
    rows = reference_rows(
        _batch()[:3],
        cfg,
        "cpu",
        transport=transport,
        owner_can_materialize=owner_cuda,
        runtime=rt,
    )
    assert [r["reference_defer"] for r in rows] == [False] * 3
    assert all(r["reference_decision_equal"] for r in rows)
