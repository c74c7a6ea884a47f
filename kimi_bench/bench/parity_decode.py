"""``parity``'s third arm: the one whose inputs travel encoded (``deferred-decode``,
proposed, not in the runtime; ``parity_arms.decode_arm``).

Every accepted input that has an encoded form goes through the arm as its encoded bytes:
a folder's image files and the package photos as the files' bytes, a generated PIL image
as a client would send it (``encoded.encode_for_request``: PNG, or JPEG where PNG cannot
hold the mode). The arm's owner output is held against the eager arm on the *decoded*
input (``encoded.decode_image``, the producer's decode): when that decodes to the pixels
parity's eager arm already saw (lossless encodings), that eager output is reused;
otherwise (JPEG of a generated CMYK image) eager runs again on the decoded images.
Tensors have no encoded form and take the raw-uint8 path, as every routed input does;
each row says which path its input took and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from kimi_bench.bench.parity_arms import decode_arm
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.corpus import CorpusEntry
from kimi_bench.domain.decoders import DecoderChoice, choose
from kimi_bench.domain.encoded import EncodedImage, encode_for_request
from kimi_bench.domain.navit import ResizePlan, plan_resize
from kimi_bench.domain.pixels import stage_input
from kimi_bench.domain.runtime import get_profile
from kimi_bench.pipeline import OwnerOutput, run_arm, run_eager

# the paths an input can take through the arm (the rows' ``decode_path``)
ENCODED, ROUTED, KEPT_EAGER = "encoded", "raw", "eager"
DECODE_KEYS = (
    "decode_path",  # encoded (the owner decodes), raw (routed to raw uint8) or eager
    "decode_reason",
    "encoded_bytes",
    "decode_bit_exact_fp32",
    "decode_bit_exact_bf16",
)


def encoded_input(entry: CorpusEntry, obj: Any) -> EncodedImage | None:
    """The input as encoded bytes: the file's own, or a generated image's encoding."""
    if entry.encoded is not None:
        return EncodedImage(entry.encoded(), entry.name)
    if isinstance(obj, Image.Image):
        return EncodedImage(encode_for_request(obj), entry.name)
    return None


def _same_pixels(a: Any, b: Any, cfg: PreprocessConfig) -> bool:
    """Both stage to the same uint8 CHW tensor, so eager's output on one is the other's."""
    return bool(torch.equal(stage_input(a, cfg, require_uint8=False),
                            stage_input(b, cfg, require_uint8=False)))  # fmt: skip


def run_decode_arm(
    objs: Sequence[Any],
    encoded: Sequence[EncodedImage | None],
    plans: Sequence[ResizePlan],
    eager: OwnerOutput,
    cfg: PreprocessConfig,
    ranks: int,
    producer: torch.device,
    rank_dev: torch.device,
    **kw: Any,
) -> list[dict[str, Any]]:
    """The arm over a batch, and one dict of ``DECODE_KEYS`` per input (none without
    an arm that takes encoded inputs)."""
    arm = decode_arm()
    if arm is None:
        return [{} for _ in objs]
    inputs = [e if e is not None else o for o, e in zip(objs, encoded, strict=True)]
    # the arm plans from what it holds: the header of an encoded input
    arm_plans = [
        plan_resize(e.width, e.height, cfg) if e is not None and e.header.error is None else p
        for e, p in zip(encoded, plans, strict=True)
    ]
    pairs = list(zip(objs, encoded, strict=True))
    # decoded as the arm's owner decodes: the runtime's decoder on this device
    given = kw.get("decoder", "auto")  # parity's replayed choice: its one decode per input
    choice = (given if isinstance(given, DecoderChoice)
              else choose(str(given), get_profile(kw.get("runtime")), producer))  # fmt: skip
    decoded = [choice.decode(e.data, producer).image if e is not None else o for o, e in pairs]
    reference = eager
    if not all(_same_pixels(d, o, cfg) for d, o in zip(decoded, objs, strict=True)):
        reference = run_eager(decoded, arm_plans, cfg, ranks, producer, rank_dev,
                              runtime=kw.get("runtime"))  # fmt: skip
    out = run_arm(arm, inputs, arm_plans, cfg, ranks, producer, rank_dev, **kw)
    rows = []
    for i, d in enumerate(out.decisions):
        path = ENCODED if d.encoded else ROUTED if d.defer else KEPT_EAGER
        rows.append(
            {
                "decode_path": path,
                "decode_reason": d.reason,
                "encoded_bytes": encoded[i].nbytes if encoded[i] is not None else None,  # type: ignore[union-attr]
                "decode_bit_exact_fp32": bool(torch.equal(reference.fp32[i], out.fp32[i])),
                "decode_bit_exact_bf16": bool(torch.equal(reference.bf16[i], out.bf16[i])),
            }
        )
    return rows


def decode_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The arm's summary over the accepted rows: paths taken, bytes, bit-exactness."""
    ran = [r for r in rows if r.get("decode_path") is not None]
    enc = [r for r in ran if r["decode_path"] == ENCODED]
    differing = [r["name"] for r in ran
                 if not (r["decode_bit_exact_fp32"] and r["decode_bit_exact_bf16"])]  # fmt: skip
    arm = decode_arm()
    return {
        "arm": arm.name if arm else None,
        "label": arm.label if arm else "",
        "inputs": len(ran),
        "encoded": len(enc),
        "routed_raw": sum(1 for r in ran if r["decode_path"] == ROUTED),
        "eager": sum(1 for r in ran if r["decode_path"] == KEPT_EAGER),
        "encoded_bytes": sum(r["encoded_bytes"] or 0 for r in enc),
        "raw_bytes_of_encoded": sum(r["raw_bytes"] or 0 for r in enc),
        "all_bit_exact_fp32": bool(ran) and all(r["decode_bit_exact_fp32"] for r in ran),
        "all_bit_exact_bf16": bool(ran) and all(r["decode_bit_exact_bf16"] for r in ran),
        "differing": differing,
    }


def decode_note() -> str:
    """What the ``decode_*`` columns hold."""
    arm = decode_arm()
    if arm is None:
        return ""
    return DECODE_NOTE.format(arm=arm.name, label=arm.label)


DECODE_NOTE = (
    "decode_* columns: the {arm} arm ({label}): the input "
    "travels as its encoded bytes (files: their own; generated images: PNG, or JPEG q95 "
    "where PNG cannot hold the mode; tensors: none), planned from the header; only the "
    "owner decodes (Image.open + load, as the producer would). decode_path encoded / raw "
    "(routed to raw uint8, decode_reason says why) / eager (the byte heuristic); "
    "decode_bit_exact_* hold its owner output against eager on the decoded input "
    "(torch.equal, FP32 and BF16)."
)
