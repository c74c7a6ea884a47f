"""The producer's feature hash per runtime profile (SPEC section 12): bytes hashed and
copies made per item kind, sglang-0.5.23 with its preprocess cache on and off, and the
PR era (``pipeline/feature_hash.py``)."""

from __future__ import annotations

import hashlib

import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.policy import Decision, processed_bytes
from kimi_bench.pipeline import make_step, producer_step
from kimi_bench.pipeline.feature_hash import hash_on_host
from tests.decoders import fake_gpu_decoder

K3 = get_preset("kimi-k3")
CPU = torch.device("cpu")
NEW, OFF, PR = "sglang-0.5.23", "sglang-0.5.23+cache-off", "pr-33921"
HASH_OPS = ("sha256", "gpu_hash", "hash_concat", "hash_flatten")


def image(w: int = 64, h: int = 48, seed: int = 0) -> Image.Image:
    g = torch.Generator().manual_seed(seed)
    arr = torch.randint(0, 256, (h, w, 3), generator=g, dtype=torch.uint8)
    return Image.fromarray(arr.numpy())


def hash_rows(runtime: str, arm: str, images: list, defer: bool | None = None) -> dict:
    """Ledger rows of the ``hash`` stage by op: (bytes, count)."""
    step = make_step(arm, K3, CPU, runtime=runtime)
    plans = [plan_resize(im.width, im.height, K3) for im in images]
    decisions = None
    if defer is not None:
        decisions = [Decision(defer, "test", 0, processed_bytes(p)) for p in plans]
    producer_step(step, images, "", plans=plans, decisions=decisions)
    out: dict[str, tuple[int, int]] = {}
    for r in step.ledger.rows():
        if r["stage"] == "hash":
            b, c = out.get(r["op"], (0, 0))
            out[r["op"]] = (b + r["bytes"], c + r["count"])
    return out


def raw(im: Image.Image) -> int:
    return 3 * im.width * im.height


def fp32(im: Image.Image) -> int:
    return processed_bytes(plan_resize(im.width, im.height, K3))


def test_new_cache_on_hashes_a_deferred_items_contiguous_raw_uint8_once_no_copy() -> None:
    ims = [image(), image(50, 70, 1)]
    rows = hash_rows(NEW, "deferred", ims, defer=True)
    assert rows == {"sha256": (sum(map(raw, ims)), 2)}  # no flatten copy: already contiguous


def test_eager_items_are_concatenated_on_the_device_then_hashed_there() -> None:
    ims = [image(), image(50, 70, 1)]
    expect = {"hash_concat": (sum(map(fp32, ims)), 2), "gpu_hash": (sum(map(fp32, ims)), 2)}
    assert hash_rows(NEW, "eager", ims) == expect
    assert hash_rows(PR, "eager", ims) == expect  # set_pad_value hashes every feature


def test_pr_era_flattens_the_permuted_view_before_its_sha256() -> None:
    ims = [image(), image(50, 70, 1)]
    rows = hash_rows(PR, "deferred", ims, defer=True)
    total = sum(map(raw, ims))
    assert rows == {"hash_flatten": (total, 2), "sha256": (total, 2)}


@pytest.mark.parametrize("arm", ["eager", "deferred"])
def test_new_cache_off_hashes_no_feature(arm: str) -> None:
    assert hash_rows(OFF, arm, [image(), image(50, 70, 1)]) == {}


def test_pr_era_hashes_a_gpu_decode_on_the_device_before_its_cpu() -> None:
    import io

    buf = io.BytesIO()
    image().save(buf, "JPEG", quality=90)
    with fake_gpu_decoder():
        step = make_step("deferred", K3, CPU, runtime=PR, decoder="nvimgcodec")
        im = step.arm.load(step, buf.getvalue())
        producer_step(step, [im], "")
    ops = [(r["stage"], r["op"]) for r in step.ledger.rows()]
    assert ops.index(("hash", "gpu_hash")) < ops.index(("d2h", "d2h"))
    rows = {r["op"]: r["bytes"] for r in step.ledger.rows() if r["stage"] == "hash"}
    assert rows == {"hash_concat": 3 * 64 * 48, "gpu_hash": 3 * 64 * 48}


def test_the_host_hash_is_the_runtimes_sha256_of_the_bytes() -> None:
    t = torch.arange(24, dtype=torch.uint8).reshape(2, 3, 4).permute(2, 0, 1)
    step = make_step("deferred", K3, CPU, runtime=PR)
    want = int.from_bytes(hashlib.sha256(t.contiguous().numpy().tobytes()).digest()[:8], "big")
    assert hash_on_host(step, t) == want


def test_the_hash_is_a_timed_stage_between_producer_and_d2h() -> None:
    from kimi_bench.pipeline.step import ClockHook

    hook = ClockHook(CPU)
    step = make_step("eager", K3, CPU, runtime=NEW, hook=hook)
    producer_step(step, [image()], "")
    assert list(hook.marks)[:3] == ["producer", "hash", "d2h"]
    assert hook.marks["producer"] <= hook.marks["hash"] <= hook.marks["d2h"]
