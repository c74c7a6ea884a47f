"""The copy ledger of a known input (2 images of 64x48 RGB, 2 ranks, CPU) against ledgers
written out by hand from SPEC section 10, for each runtime profile and carrier."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from PIL import Image

from kimi_bench.bench.micro import run_micro
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import plan_resize
from kimi_bench.options import MicroOptions
from kimi_bench.pipeline import carrier, decide, make_step, produce, take
from kimi_bench.pipeline.transport import cleanup_segments, new_prefix

K3 = get_preset("kimi-k3")
RAW = 64 * 48 * 3  # one image's uint8 bytes
PLAN = plan_resize(64, 48, K3)
FP32 = PLAN.num_patches * 3 * 14 * 14 * 4  # one image's FP32 patches
BF16 = FP32 // 2  # one image's encoder output (the BF16 tower buffer)
assert 3 * PLAN.padded_width * PLAN.padded_height * 4 == FP32


class Small:
    """A pickled blob of metadata only (shm carrier): under 4 KiB."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, int) and 0 < other < 4096

    def __repr__(self) -> str:
        return "<small>"


class AtLeast:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, int) and self.n <= other < self.n + 4096

    def __repr__(self) -> str:
        return f"<>={self.n}>"


def _key(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        ((r["stage"], r["op"], r["src"], r["dst"], r["count"], r["bytes"]) for r in rows),
        key=lambda t: (t[0], t[1], t[2], t[3], t[4]),
    )


def _expected(arm: str, runtime: str, carrier: str) -> list[tuple[Any, ...]]:
    """Hand-written: stage, op, src, dst, count, bytes (2 images, 2 ranks, CPU)."""
    blob = Small() if carrier == "shm" else AtLeast(2 * (FP32 if arm == "eager" else RAW))
    rows: list[tuple[Any, ...]] = [
        ("producer", "convert", "pil", "pil", 2, 2 * RAW),
        ("producer", "to_numpy", "pil", "host", 2, 2 * RAW),
        ("serialize", "pickle", "host", "host", 1, blob),
        ("to_rank0", "ipc", "host", "host", 1, blob),
        ("to_rank0", "unpickle", "host", "host", 1, blob),
        ("broadcast", "pickle", "host", "host", 1, blob),  # rank 0 pickles again
        ("broadcast", "gloo_broadcast", "host", "wire", 1, blob),  # to the one other rank
        ("broadcast", "bytes_copy", "host", "host", 1, blob),  # rank 1: bytes()
        ("broadcast", "unpickle", "host", "host", 1, blob),  # rank 1: loads
        # ranks share the (emulated) device: the gather carries metadata only, not a copy
        ("gather", "gather_metadata", "device", "wire", 2, 2 * BF16),
    ]
    payload = 2 * (FP32 if arm == "eager" else RAW)
    if arm == "eager":
        rows += [
            ("producer", "h2d", "host", "device", 2, 2 * RAW),  # per image, no host stack
            ("d2h", "d2h", "device", "host", 2, 2 * FP32),  # one .cpu() per item
            ("pre_embed_move", "h2d", "host", "device", 4, 4 * FP32),  # every rank x item
        ]
    else:
        rows.append(("owner_h2d", "h2d", "host", "device", 2, 2 * RAW))  # owners only
        contiguous_stage = "producer" if runtime == "sglang-0.5.23" else "serialize"
        if runtime == "sglang-0.5.23" or carrier == "shm":
            rows.append((contiguous_stage, "hwc_to_chw", "host", "host", 2, 2 * RAW))
    # the producer's feature hash (SPEC section 12): an eager item's FP32 feature is
    # concatenated on the device and hashed there, before the .cpu(); a deferred item's raw
    # uint8 gets a CPU SHA-256 pass, after a contiguous host copy of the permuted view in the
    # PR era (tensor_hash's flatten)
    if arm == "eager":
        rows += [("hash", "hash_concat", "device", "device", 2, payload),
                 ("hash", "gpu_hash", "device", "device", 2, payload)]  # fmt: skip
    else:
        rows.append(("hash", "sha256", "host", "host", 2, payload))
        if runtime == "pr-33921":
            rows.append(("hash", "hash_flatten", "host", "host", 2, payload))
    if runtime == "sglang-0.5.23":  # the preprocess cache (on by default): the content
        # digest of each (generated, so decoded) image's pixels, and the artifact stored
        rows += [("producer", "sha256", "host", "host", 2, 2 * RAW),
                 ("producer", "cache_store", "host", "host", 2, payload)]  # fmt: skip
    if carrier == "shm":
        rows.append(("serialize", "shm_fallocate", "shm", "shm", 2, payload))
        rows.append(("serialize", "shm_copy_in", "host", "shm", 2, payload))
        receive = "map" if runtime == "sglang-0.5.23" else "clone"
        rows.append(("take_copy", receive, "shm", "host", 4, 2 * payload))  # 2 ranks x 2 items
    return sorted(rows, key=lambda t: (t[0], t[1], t[2], t[3], t[4]))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("runtime", "carrier"),
    [("sglang-0.5.23", "shm"), ("pr-33921", "shm"), ("pr-33921", "pickle")],
)
def test_full_ledger_two_images_two_ranks(runtime: str, carrier: str):
    report = run_micro(
        MicroOptions(
            synthetic="2x64x48",
            ranks=2,
            repeats=1,
            launches=1,
            warmup=0,
            device="cpu",
            transport=carrier,
            runtime=runtime,
        )
    )
    for arm in ("eager", "deferred"):
        got = _key(report.data["arms"][arm]["copies"])
        assert got == _expected(arm, runtime, carrier), arm
    receivers = [c for c in report.data["arms"]["deferred"]["copies"] if c["op"] == "clone"]
    assert len(receivers) == (1 if runtime == "pr-33921" and carrier == "shm" else 0)


@pytest.mark.parametrize("runtime", ["sglang-0.5.23", "pr-33921"])
def test_producer_and_receiver_copies_per_profile(runtime: str):
    """In one process: the deferred producer, the shm wrap and one rank's take."""
    step = make_step("deferred", K3, torch.device("cpu"), runtime=runtime, ledger=Ledger())
    images = [Image.new("RGB", (64, 48), (i * 50, 7, 9)) for i in range(2)]
    plans = [PLAN, PLAN]
    items = produce(step, images, plans, decide(step, images, plans))
    prefix = new_prefix()
    try:
        packed = carrier("shm").wrap(step, items, prefix)
        taken, names = take(step, packed)
        assert len(names) == 2
        assert torch.equal(taken[0].feature, items[0].feature.contiguous())
    finally:
        cleanup_segments(prefix)
    rows = {(r["stage"], r["op"]): (r["count"], r["bytes"]) for r in step.ledger.rows()}
    hwc_stage = "producer" if runtime == "sglang-0.5.23" else "serialize"
    assert rows[(hwc_stage, "hwc_to_chw")] == (2, 2 * RAW)
    assert rows[("serialize", "shm_copy_in")] == (2, 2 * RAW)
    receive = "map" if runtime == "sglang-0.5.23" else "clone"
    assert rows[("take_copy", receive)] == (2, 2 * RAW)
    copied = step.ledger.copied_bytes("take_copy")
    assert copied == (0 if receive == "map" else 2 * RAW)


def test_policy_sends_an_image_above_the_heuristic_eager_inside_the_deferred_arm():
    step = make_step("deferred", K3, torch.device("cpu"), runtime="sglang-0.5.23", ledger=Ledger())
    images = [Image.new("RGB", (640, 480)), Image.new("RGB", (20000, 100))]
    plans = [plan_resize(*im.size, K3) for im in images]
    decisions = decide(step, images, plans)
    assert [d.defer for d in decisions] == [True, False]
    assert "FP32 is smaller" in decisions[1].reason
    items = produce(step, images, plans, decisions)
    assert items[0].is_deferred and items[0].feature.dtype == torch.uint8
    assert not items[1].is_deferred and items[1].feature.dtype == torch.float32
    # the PR decided per request: together the two images defer
    pr = make_step("deferred", K3, torch.device("cpu"), runtime="pr-33921", ledger=Ledger())
    assert [d.defer for d in decide(pr, images, plans)] == [True, True]
