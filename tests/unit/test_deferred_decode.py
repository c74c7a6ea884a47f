"""The deferred-decode arm (proposed, not in the runtime): encoded inputs planned from
their header, shipped encoded, decoded once on the owner; bit-identical to eager on the
decoded input, or routed to raw uint8 with the reason."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.contract import ENCODED_KEY, ContractError, MMItem
from kimi_bench.domain.encoded import (
    EncodedImage,
    decode_image,
    encode_for_request,
    read_header,
    route_reason,
)
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.policy import raw_bytes
from kimi_bench.engine.serve_workers import _fail_undecoded
from kimi_bench.pipeline import (
    carrier,
    decide,
    make_step,
    owner_decode,
    produce,
    rank_step,
    run_arm,
    take,
)
from kimi_bench.pipeline.transport import unlink

CPU = torch.device("cpu")


def _smooth(w: int, h: int, mode: str = "RGB") -> Image.Image:
    """A compressible picture (gradients and a little noise): encodes below its raw size."""
    x = np.linspace(0, 247, w, dtype=np.float32)[None, :]
    y = np.linspace(0, 247, h, dtype=np.float32)[:, None]
    noise = np.random.default_rng(w * h).integers(0, 8, size=(h, w), dtype=np.uint8)
    arr = np.empty((h, w, 4), np.uint8)
    for c, plane in enumerate((x + 0 * y, y + 0 * x, 247 - x + 0 * y, (x + y) / 2)):
        arr[..., c] = plane.astype(np.uint8) + noise  # at most 247 + 7: never wraps
    rgba = Image.fromarray(arr, "RGBA")
    return rgba if mode == "RGBA" else rgba.convert(mode)


def _save(im: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def _exif(orientation: int) -> bytes:
    ex = Image.Exif()
    ex[0x0112] = orientation
    return ex.tobytes()


def _palette_trns() -> bytes:
    return _save(_smooth(200, 150).quantize(32), "PNG", transparency=0)


def _i16() -> bytes:
    arr = (np.linspace(0, 1023, 120 * 90).reshape(90, 120)).astype(np.uint16)
    return _save(Image.fromarray(arr), "PNG")


# name -> encoded bytes the arm must ship encoded and keep bit-identical
ENCODED = {
    "jpeg_rgb": lambda: _save(_smooth(640, 480), "JPEG", quality=85),
    "jpeg_progressive": lambda: _save(_smooth(333, 217), "JPEG", quality=90, progressive=True),
    "jpeg_exif_rotate_6": lambda: _save(_smooth(300, 200), "JPEG", exif=_exif(6)),
    "jpeg_exif_rotate_8": lambda: _save(_smooth(57, 301), "JPEG", exif=_exif(8)),
    "jpeg_cmyk": lambda: _save(_smooth(160, 120, "CMYK"), "JPEG", quality=90),
    "jpeg_gray": lambda: _save(_smooth(250, 100, "L"), "JPEG"),
    # K2.5 downscales it (16384 patches), K3 does not (65536)
    "jpeg_large_downscaled": lambda: _save(_smooth(2400, 1800), "JPEG", quality=80),
    "png_rgba": lambda: _save(_smooth(300, 200, "RGBA"), "PNG"),
    "png_la": lambda: _save(_smooth(120, 90, "LA"), "PNG"),
    "png_gray": lambda: _save(_smooth(333, 111, "L"), "PNG"),
    "png_1bit": lambda: _save(_smooth(150, 77, "L").convert("1"), "PNG"),
    "png_palette_transparency": _palette_trns,
    "png_16bit": _i16,
    "webp_lossy": lambda: _save(_smooth(400, 300), "WEBP", quality=80),
    "webp_rgba_lossless": lambda: _save(_smooth(96, 64, "RGBA"), "WEBP", lossless=True),
}


def _noise_png() -> bytes:
    arr = np.random.default_rng(0).integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
    return _save(Image.fromarray(arr), "PNG")


def _two_frame_webp() -> bytes:
    frames = [_smooth(64, 48), _smooth(64, 48).transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    return _save(frames[0], "WEBP", save_all=True, append_images=frames[1:], lossless=True)


# name -> (bytes, words the routing reason must hold)
ROUTED = {
    "gif": (lambda: _save(_smooth(64, 48).quantize(16), "GIF"), "format GIF"),
    "tiff": (lambda: _save(_smooth(64, 48), "TIFF"), "format TIFF"),
    "webp_animated": (_two_frame_webp, "2 frames"),
    "png_noise": (_noise_png, "nothing saved"),
    "png_truncated": (lambda: _save(_smooth(64, 48), "PNG")[:600], "no end marker"),
}


def _pair(data: bytes, preset: str, ranks: int = 2):
    cfg = get_preset(preset)
    enc = EncodedImage(data, "x")
    plan = plan_resize(enc.width, enc.height, cfg)
    eager = run_arm("eager", [decode_image(data)], [plan], cfg, ranks, CPU, CPU)
    arm = run_arm("deferred-decode", [enc], [plan], cfg, ranks, CPU, CPU)
    return eager, arm


# the 4.3 MP JPEG takes seconds per preset: with the slow tests
_NAMES = [
    pytest.param(n, marks=pytest.mark.slow) if n == "jpeg_large_downscaled" else n
    for n in sorted(ENCODED)
]


@pytest.mark.parametrize("preset", ["kimi-k3", "kimi-k2.5"])
@pytest.mark.parametrize("name", _NAMES)
def test_encoded_inputs_travel_encoded_and_stay_bit_identical(name: str, preset: str):
    eager, arm = _pair(ENCODED[name](), preset)
    d = arm.decisions[0]
    assert d.defer and d.encoded, d.reason
    assert "travels encoded" in d.reason
    assert torch.equal(eager.fp32[0], arm.fp32[0])
    assert torch.equal(eager.bf16[0], arm.bf16[0])
    ops = [(r["stage"], r["op"], r["count"]) for r in arm.ledger.rows() if r["op"] == "decode"]
    assert ops == [("owner_h2d", "decode", 1)]  # one decode, on the owner, none upstream


@pytest.mark.parametrize("name", sorted(ROUTED))
def test_inputs_the_header_cannot_vouch_for_are_routed_with_the_reason(name: str):
    make, words = ROUTED[name]
    data = make()
    enc = EncodedImage(data, name)
    if name == "png_truncated":  # routed: the producer decodes, so the error stays there
        cfg = get_preset("kimi-k3")
        step = make_step("deferred-decode", cfg, CPU)
        plan = plan_resize(enc.width, enc.height, cfg)
        (d,) = decide(step, [enc], [plan])
        assert d.defer and not d.encoded and words in d.reason
        with pytest.raises(OSError):  # PIL's error, at the producer, as in every arm
            produce(step, [enc], [plan], [d])
        return
    eager, arm = _pair(data, "kimi-k3")
    d = arm.decisions[0]
    assert d.defer and not d.encoded
    assert "routed:" in d.reason and words in d.reason, d.reason
    assert torch.equal(eager.fp32[0], arm.fp32[0])
    assert torch.equal(eager.bf16[0], arm.bf16[0])
    decodes = [r for r in arm.ledger.rows() if r["op"] == "decode"]
    assert [r["stage"] for r in decodes] == ["producer"]


def test_a_mixed_request_keeps_input_order_and_owners_decode_only_their_own():
    cfg = get_preset("kimi-k3")
    datas = [ENCODED[n]() for n in ("jpeg_rgb", "png_rgba", "webp_lossy", "jpeg_cmyk")]
    inputs = [EncodedImage(d) for d in datas]
    inputs.insert(2, EncodedImage(_noise_png()))  # routed: raw uint8
    inputs.append(torch.randint(0, 256, (3, 40, 50), dtype=torch.uint8))  # no encoded form
    plans = [plan_resize(*(o.size if isinstance(o, EncodedImage) else (50, 40)), cfg)
             for o in inputs]  # fmt: skip
    decoded = [decode_image(o.data) if isinstance(o, EncodedImage) else o for o in inputs]
    eager = run_arm("eager", decoded, plans, cfg, 3, CPU, CPU, images_per_request=6)
    arm = run_arm("deferred-decode", inputs, plans, cfg, 3, CPU, CPU, images_per_request=6)
    assert [d.encoded for d in arm.decisions] == [True, True, False, True, True, False]
    for e, a in zip(eager.fp32 + eager.bf16, arm.fp32 + arm.bf16, strict=True):
        assert torch.equal(e, a)
    rows = arm.ledger.rows()
    owner_decodes = sum(r["count"] for r in rows if r["op"] == "decode" and
                        r["stage"] == "owner_h2d")  # fmt: skip
    assert owner_decodes == 4  # each encoded image once, by its owner only
    carried = sum(o.nbytes for o, d in zip(inputs, arm.decisions, strict=True) if d.encoded)
    raw = sum(d.raw_bytes for d in arm.decisions if d.encoded)
    assert carried < raw


def test_encoded_bytes_ride_the_shm_carrier_unchanged():
    cfg = get_preset("kimi-k3")
    enc = EncodedImage(ENCODED["jpeg_rgb"]())
    step = make_step("deferred-decode", cfg, CPU)
    plan = plan_resize(enc.width, enc.height, cfg)
    items = produce(step, [enc], [plan], decide(step, [enc], [plan]))
    assert items[0].is_encoded and items[0].feature.dim() == 1
    items[0].validate()
    packed = carrier("shm").wrap(step, items, "kbtest-dd")
    taken, names = take(step, packed)
    try:
        assert bytes(taken[0].feature.numpy().tobytes()) == enc.data
        shm_in = [r for r in step.ledger.rows() if r["op"] == "shm_copy_in"]
        assert [r["bytes"] for r in shm_in] == [enc.nbytes]  # encoded bytes move, not pixels
        raw, resident = owner_decode(step, taken[0])
        assert resident is False  # PIL decodes on the host
        assert not raw.is_encoded and raw.is_deferred and raw.feature.shape == (3, 480, 640)
    finally:
        unlink(names)


def test_the_owner_refuses_a_decode_that_is_not_the_planned_image():
    cfg = get_preset("kimi-k3")
    enc = EncodedImage(ENCODED["png_gray"]())
    step = make_step("deferred-decode", cfg, CPU)
    plan = plan_resize(enc.width, enc.height, cfg)
    (item,) = produce(step, [enc], [plan], decide(step, [enc], [plan]))
    forged = dict(item.model_specific_data)
    forged[ENCODED_KEY] = {**forged[ENCODED_KEY], "width": enc.width + 1}
    with pytest.raises(ContractError, match="header planned"):
        owner_decode(step, MMItem(item.feature, forged))


def test_an_encoded_item_must_be_deferred_and_one_dimensional():
    cfg = get_preset("kimi-k3")
    enc = EncodedImage(ENCODED["png_gray"]())
    step = make_step("deferred-decode", cfg, CPU)
    plan = plan_resize(enc.width, enc.height, cfg)
    (item,) = produce(step, [enc], [plan], decide(step, [enc], [plan]))
    with pytest.raises(ContractError, match="1-D uint8"):
        MMItem(item.feature.view(1, -1), item.model_specific_data).validate()


def test_header_reads_size_mode_alpha_and_orientation_without_decoding():
    h = read_header(ENCODED["jpeg_exif_rotate_6"]())
    assert (h.format, h.mode, h.width, h.height, h.orientation) == ("JPEG", "RGB", 300, 200, 6)
    # the decode path (the runtime's load_image) does not apply EXIF orientation
    assert decode_image(ENCODED["jpeg_exif_rotate_6"]()).size == (300, 200)
    p = read_header(_palette_trns())
    assert (p.mode, p.has_alpha, p.channels) == ("P", True, 4)
    assert read_header(b"not an image").error is not None
    assert "header does not open" in str(route_reason(EncodedImage(b"not an image")))


def test_policy_counts_an_encoded_input_from_its_header():
    cfg = get_preset("kimi-k3")
    enc = EncodedImage(ENCODED["png_rgba"]())
    plan = plan_resize(enc.width, enc.height, cfg)
    assert raw_bytes(enc, plan) == 4 * 300 * 200


def test_encode_for_request_is_lossless_for_png_modes():
    for mode in ("RGB", "RGBA", "L", "LA", "1"):
        im = _smooth(37, 23, mode)
        back = decode_image(encode_for_request(im))
        assert back.mode == im.mode and back.tobytes() == im.tobytes()
    assert read_header(encode_for_request(_smooth(8, 8, "CMYK"))).format == "JPEG"


def _corrupt_png() -> bytes:
    """A PNG whose header and end marker are fine and whose pixel data is not."""
    data = bytearray(_save(_smooth(200, 150), "PNG"))
    data[data.index(b"IDAT") + 104] ^= 0xFF
    return bytes(data)


def test_a_decode_error_on_the_owner_raises_or_is_listed_with_a_stand_in():
    cfg = get_preset("kimi-k3")
    good, bad = EncodedImage(ENCODED["png_gray"]()), EncodedImage(_corrupt_png())
    assert route_reason(bad) is None  # nothing in the header gives it away
    step = make_step("deferred-decode", cfg, CPU)
    plans = [plan_resize(*e.size, cfg) for e in (good, bad)]
    items = produce(step, [good, bad], plans, decide(step, [good, bad], plans))
    assert all(it.is_encoded for it in items)
    with pytest.raises(OSError, match="broken data stream"):
        rank_step(step, [MMItem(it.feature, dict(it.model_specific_data)) for it in items], 0, 1)
    failed: list[tuple[int, str]] = []
    out = rank_step(step, items, 0, 1, failed)
    assert [i for i, _ in failed] == [1] and failed[0][1].startswith("OSError: broken data stream")
    assert out.tower is not None and out.mine == [0, 1]  # the batch went through


def test_serve_marks_the_request_whose_image_its_owner_could_not_decode():
    ok = [{"rid": 0, "items": [1, 2]}, {"rid": 1, "items": [3]}]
    _fail_undecoded(ok, [(2, "OSError: image file is truncated")])
    assert "error" not in ok[0]
    assert ok[1]["error"] == (
        "OSError: the owner could not decode image 2 of the batch: image file is truncated"
    )
