"""The copy ledger of the one pipeline under the ``vllm-0.33`` profile, row by row against
SPEC section 13: the API server's copies, the hop to EngineCore, each branch of the
``MessageQueue`` (the ring below 16 MiB, ZMQ at or above it), the opt-in arena (on and
off), and pinned staging + H2D of every item on every rank. Every rank runs in this
process (``run_in_process``: the carrier's broadcast goes through a mailbox, the same
steps and ledger rows as over gloo)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.domain import vllm_k3
from kimi_bench.domain.config import resolve_config
from kimi_bench.domain.encoded import EncodedImage, encode_jpeg
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import plan_resize
from kimi_bench.pipeline import mq
from kimi_bench.pipeline.in_process import OwnerOutput, run_in_process
from kimi_bench.pipeline.recipe import make_step
from kimi_bench.pipeline.transport import list_segments

CFG = resolve_config("kimi-k3", None)
CPU = torch.device("cpu")
PATCHES_1536x1024 = 4_786_320  # SPEC section 13: uint8 patches of one 1536x1024 image
RAW_1536x1024 = 1536 * 1024 * 3


def _photo(w: int, h: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


def _run(spec: str, inputs: Sequence[Any], ranks: int, ring: int | None = None) -> OwnerOutput:
    step = make_step("vllm-uint8", CFG, CPU, carrier_="vllm-mq", runtime=spec)
    if ring is not None:  # the same profile with another ring size (the branch's edge)
        step.profile = dataclasses.replace(step.profile, ring_max_bytes=ring)
    plans = [plan_resize(i.width, i.height, CFG) for i in inputs]
    decisions = step.arm.decide(step, inputs, plans)
    return run_in_process(step, inputs, plans, ranks, CPU, decisions=decisions)


def _rows(ledger: Ledger, stage: str) -> dict[str, tuple[int, int]]:
    """op -> (bytes, count) of one stage (every op of the stage once in these runs)."""
    return {r["op"]: (r["bytes"], r["count"]) for r in ledger.rows() if r["stage"] == stage}


def _meta(ledger: Ledger, stage: str, op: str) -> int:
    return _rows(ledger, stage)[op][0]


def test_the_spec_request_at_tp8_goes_through_zmq_and_every_rank_copies_every_item():
    data = encode_jpeg(_photo(1536, 1024))
    # encoder TP mode data: the same ledger as weights (the next test holds them equal),
    # with 4 normalisations in place of 32 (a faster test)
    out = _run("vllm-0.33+tp-data", [EncodedImage(data)] * 4, 8)
    ledger, request = out.ledger, 4 * PATCHES_1536x1024  # 19.1 MB: at or above 16 MiB
    assert _rows(ledger, "producer") == {
        "decode": (4 * RAW_1536x1024, 4),
        "exif_transpose": (4 * RAW_1536x1024, 4),
        "pil_resize": (4 * RAW_1536x1024, 4),  # PIL resize + np.asarray: 2 x 18.9 MB
        "to_numpy": (4 * RAW_1536x1024, 4),
        "patchify": (request, 4),
    }
    assert _rows(ledger, "hash") == {"blake3": (4 * len(data), 4)}
    meta = _meta(ledger, "serialize", "msgpack")
    assert 0 < meta < 4096  # the metadata only: the patches travel out of band
    assert _rows(ledger, "serialize") == {"msgpack": (meta, 1), "oob_frame": (request, 4)}
    assert _rows(ledger, "to_rank0") == {"unmsgpack": (meta, 1), "frombuffer": (request, 4)}
    bc = _rows(ledger, "broadcast")
    total = request + _meta(ledger, "broadcast", "pickle")
    assert "ring_copy_in" not in bc and "ring_copy_out" not in bc
    zmq = [r for r in ledger.rows() if r["op"] == "zmq_delivery"]
    assert [(r["dst"], r["bytes"], r["count"]) for r in zmq] == [
        ("wire", 7 * total, 7),  # one delivery per reader: ranks 1..7 over gloo
        ("host", total, 1),  # and worker 0 (rank 0 here)
    ]
    assert bc["frombuffer"] == (8 * request, 8 * 4)  # zero-copy rebuild on every rank
    assert _rows(ledger, "pre_embed_move") == {
        "pinned_staging": (8 * request, 8),  # every rank, every item: 8 x 19.1 MB
        "h2d": (8 * request, 8),
    }
    assert _rows(ledger, "take_copy") == {} and _rows(ledger, "owner_h2d") == {}
    assert ledger.copied_bytes("pre_embed_move") == 16 * request


def test_below_16_mib_the_message_goes_through_the_ring_once_and_out_once_per_reader():
    images = [_photo(1536, 1024, s) for s in range(2)]
    out = _run("vllm-0.33", images, 3)
    assert out.ledger.rows() == _run("vllm-0.33+tp-data", images, 3).ledger.rows()
    bc, request = _rows(out.ledger, "broadcast"), 2 * PATCHES_1536x1024
    total = request + bc["pickle"][0]
    assert bc["ring_copy_in"] == (total, 1)
    assert bc["ring_copy_out"] == (3 * total, 3)
    assert "zmq_delivery" not in bc and "mq_arena_copy_in" not in bc
    assert _rows(out.ledger, "pre_embed_move")["pinned_staging"] == (3 * request, 3)


@pytest.mark.parametrize(("slack", "branch"), [(1, "ring_copy_in"), (0, "zmq_delivery")])
def test_the_switch_is_at_the_ring_size_itself(slack, branch):
    """A message one byte under the ring size takes the ring; one of exactly its size, ZMQ."""
    images = [_photo(64, 48)]
    first = _run("vllm-0.33", images, 2)
    total = _meta(first.ledger, "broadcast", "pickle")
    total += _rows(first.ledger, "serialize")["oob_frame"][0]
    out = _run("vllm-0.33", images, 2, ring=total + slack)
    ops = _rows(out.ledger, "broadcast")
    assert branch in ops and ({"ring_copy_in", "zmq_delivery"} - {branch}).isdisjoint(ops)


def test_the_arena_takes_no_1536x1024_image_and_changes_nothing_there():
    images = [_photo(1536, 1024, s) for s in range(2)]
    off, on = _run("vllm-0.33", images, 2), _run("vllm-0.33+arena", images, 2)
    assert "mq_arena_copy_in" not in _rows(on.ledger, "broadcast")  # 4.79 MB < 8 MiB
    assert _rows(on.ledger, "broadcast") == _rows(off.ledger, "broadcast")


def test_the_arena_takes_a_tensor_of_8_mib_and_readers_map_it():
    image = [_photo(2000, 1800)]  # 11,007,360 B of patches
    patches = 3 * 2016 * 1820
    off, on = _run("vllm-0.33", image, 3), _run("vllm-0.33+arena", image, 3)
    bc_on, bc_off = _rows(on.ledger, "broadcast"), _rows(off.ledger, "broadcast")
    assert bc_on["mq_arena_copy_in"] == (patches, 1)  # once, at EngineCore
    assert bc_on["ring_copy_in"][0] < 4096  # the message is its metadata only
    assert bc_off["ring_copy_in"][0] == patches + bc_off["pickle"][0]
    assert _rows(on.ledger, "take_copy") == {"map": (3 * patches, 3)}
    assert _rows(on.ledger, "pre_embed_move") == {"h2d": (3 * patches, 3)}  # the mapped view
    assert _rows(off.ledger, "pre_embed_move")["pinned_staging"] == (3 * patches, 3)
    assert torch.equal(on.bf16[0], off.bf16[0])
    mine = f"{mq.ARENA_PREFIX}{os.getpid()}_"
    assert list_segments(mine) == []  # every slot unlinked after the last rank's take


@pytest.mark.parametrize("spec", ["vllm-0.33", "vllm-0.33+tp-data"])
def test_the_ranks_output_is_vllms_normalised_patches(spec):
    images = [_photo(96, 64, 1), _photo(64, 128, 2), _photo(50, 40, 3)]
    out = _run(spec, images, 2)
    for im, bf16 in zip(images, out.bf16, strict=True):
        own = vllm_k3.preprocess(vllm_k3.Decoded(im, im.size, False, False), CFG)
        want = vllm_k3.normalize_bf16(own.patches, CFG).reshape(bf16.shape)
        assert torch.equal(bf16, want)
    assert out.fp32 == []  # vLLM normalises on the device only: no FP32 pixel values
