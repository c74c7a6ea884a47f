"""``parity``'s decoded-pixel parity (SPEC section 11): each input that arrives encoded is
decoded as the runtime decodes it on this device (``domain.decoders``: nvImageCodec for
sglang-0.5.23 on CUDA, torchvision's nvJPEG for the PR, PIL otherwise and as the
fallback), and both arms run on *those* pixels, as the runtime's processor sees them. Each
row also holds the runtime decoder's pixels against PIL's (the checkpoint processor's
reference decode): how many uint8 values differ, by how much at most, and how far that
moves the BF16 features the deferred path makes. A decoder other than PIL changing
pixels is the runtime's behaviour, not a parity failure: eager and deferred must still be
``torch.equal`` on the runtime's pixels.

The runtime decodes a request's image once, before the deferral decision; parity decodes
each input once too (a ``Replayed`` choice) and feeds that one decode to every arm. Each
JPEG is then decoded a second time: a decoder that returns different pixels for the same
bytes is named (``decoder_deterministic`` False, ``summary.decoding.not_deterministic``),
apart from eager-vs-deferred exactness, which holds on the one decode."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.decoders import Decoded, DecoderChoice, DeviceImage, Replayed, is_jpeg
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.pixels import stage_input

PIXEL_KEYS = (
    "decoder",  # the decoder the runtime's rule gave the input (pil, nvimgcodec, nvjpeg)
    "decoder_reason",
    "jpeg",  # baseline/progressive and chroma subsampling; None for another format
    "vs_pil_values_differ",  # uint8 values of the decoded image that differ from PIL's
    "vs_pil_max_abs",  # the largest difference, in 8-bit levels
    "vs_pil_bf16_max_abs",  # the deferred path's BF16 features: runtime pixels vs PIL's
    "decoder_deterministic",  # a JPEG decoded twice: the same pixels both times (else False)
)
NOT_DETERMINISTIC = (
    "the GPU decoder returned different pixels for the same bytes: the runtime would feed "
    "them to the model"
)
_SAMPLING = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}


def jpeg_kind(data: bytes) -> str | None:
    """``progressive 4:2:0``, ``baseline 4:4:4``, ...: what decides how a GPU decoder's
    pixels differ from PIL's (None: not a JPEG, or unreadable)."""
    if not is_jpeg(data):
        return None
    try:
        from PIL import JpegImagePlugin

        with Image.open(io.BytesIO(data)) as im:
            kind = (
                "progressive"
                if im.info.get("progressive") or im.info.get("progression")
                else "baseline"
            )
            sampling = _SAMPLING.get(JpegImagePlugin.get_sampling(im), "other sampling")
            return f"{kind} {sampling}"
    except (OSError, SyntaxError, ValueError):
        return None


def _rgb(obj: Any, cfg: PreprocessConfig) -> torch.Tensor:
    """The pixels both decodes are held against: RGB uint8 CHW on the host."""
    if isinstance(obj, DeviceImage):
        t = obj.tensor.cpu()
        return t.repeat(3, 1, 1) if t.shape[0] == 1 else t
    return stage_input(obj, cfg)[:3]


def runtime_decode(
    obj: Any,
    encoded: EncodedImage | None,
    choice: DecoderChoice,
    device: torch.device,
    cfg: PreprocessConfig,
) -> tuple[Any, dict[str, Any]]:
    """What the arms get for one input (the runtime decoder's image; the input as loaded
    when it has no encoded form) and the row's ``PIXEL_KEYS``."""
    if encoded is None:
        return obj, {}
    done = choice.decode(encoded.data, device)
    fields: dict[str, Any] = {
        "decoder_deterministic": _deterministic(done, choice, encoded.data, device, cfg),
        "decoder": done.decoder.name,
        "decoder_reason": done.reason,
        "jpeg": jpeg_kind(encoded.data),
        "vs_pil_values_differ": 0,
        "vs_pil_max_abs": 0,
        "vs_pil_bf16_max_abs": 0.0,
    }
    if not isinstance(done.image, DeviceImage):  # PIL: the reference decode itself
        return obj, fields
    ours, ref = _rgb(done.image, cfg).int(), _rgb(obj, cfg).int()
    if ours.shape != ref.shape:
        raise ValueError(
            f"{done.decoder.name} decoded {tuple(ours.shape)} where PIL decoded {tuple(ref.shape)}"
        )
    diff = (ours - ref).abs()
    fields["vs_pil_values_differ"] = int((diff > 0).sum())
    fields["vs_pil_max_abs"] = int(diff.max()) if diff.numel() else 0
    return done.image, fields


def _deterministic(
    done: Decoded, choice: DecoderChoice, data: bytes, device: torch.device, cfg: PreprocessConfig
) -> bool | None:
    """A JPEG decoded a second time (``Replayed.again``): the same decoder and pixels as
    the one decode the arms get? None: not a JPEG, or no second decode to make."""
    if not is_jpeg(data) or not isinstance(choice, Replayed):
        return None
    second = choice.again(data, device)
    first_px, second_px = _rgb(done.image, cfg), _rgb(second.image, cfg)
    return second.decoder is done.decoder and bool(torch.equal(first_px, second_px))


def feature_distance(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> list[float]:
    """Per input, the largest absolute difference of two BF16 feature sets (0.0: equal)."""
    return [float((x.float() - y.float()).abs().max()) if x.numel() else 0.0
            for x, y in zip(a, b, strict=True)]  # fmt: skip


def pixels_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Which decoders the encoded inputs got, and how many decode differently from PIL:
    the line a user acts on ("12 of 19 JPEGs decode differently from PIL (max +-3); all 8
    progressive ones"); None when no input was encoded."""
    ran = [r for r in rows if r.get("decoder") is not None and r.get("error") is None]
    if not ran:
        return None
    jpegs = [r for r in ran if r.get("jpeg")]
    differ = [r for r in ran if r["vs_pil_values_differ"]]
    progressive = [r for r in jpegs if str(r["jpeg"]).startswith("progressive")]
    prog_diff = [r for r in differ if str(r.get("jpeg") or "").startswith("progressive")]
    used: dict[str, int] = {}
    for r in ran:
        used[r["decoder"]] = used.get(r["decoder"], 0) + 1
    worst = max((r["vs_pil_max_abs"] for r in ran), default=0)
    unsteady = [r["name"] for r in ran if r.get("decoder_deterministic") is False]
    line = (
        "decoders " + ", ".join(f"{name} {n}" for name, n in used.items()) + ": "
        f"{len(differ)} of {len(jpegs)} JPEGs decode differently from PIL"
        + (f" (max +-{worst}, BF16 features up to "
           f"{max(r['vs_pil_bf16_max_abs'] for r in differ):.3g})" if differ else "")
        + (f"; {len(prog_diff)} of {len(progressive)} progressive" if progressive else "")
    )  # fmt: skip
    if unsteady:
        line += f"; {not_deterministic_line(unsteady)}"
    return {
        "decoders": used,
        "encoded_inputs": len(ran),
        "jpegs": len(jpegs),
        "differ_from_pil": [r["name"] for r in differ],
        "max_abs": worst,
        "not_deterministic": unsteady,
        "line": line,
    }


def not_deterministic_line(names: Sequence[str]) -> str:
    """The nondeterminism verdict: which files decoded to different pixels twice."""
    return f"DECODER NOT DETERMINISTIC on {', '.join(names)}: {NOT_DETERMINISTIC}"


def decode_batch(
    objs: Sequence[Any],
    encoded: Sequence[EncodedImage | None],
    choice: DecoderChoice,
    device: torch.device,
    cfg: PreprocessConfig,
) -> tuple[list[Any], list[dict[str, Any]]]:
    """``runtime_decode`` over a batch: what the arms get, and each row's fields."""
    pairs = [runtime_decode(o, e, choice, device, cfg) for o, e in zip(objs, encoded, strict=True)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def on_device(objs: Sequence[Any]) -> list[int]:
    """The inputs a device decoder decoded (their features are held against PIL's)."""
    return [i for i, o in enumerate(objs) if isinstance(o, DeviceImage)]
