"""The decoder the runtime picks (per profile, device and input) and what a GPU decode does
to the pipeline's copies, with a stand-in device decoder on the CPU (``tests/decoders.py``;
the real ones are exercised on CUDA by ``tests/gpu/test_gpu_decoders.py``)."""

from __future__ import annotations

import importlib.util
import io

import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.decoders import DeviceImage, choose, decoder, is_jpeg
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.runtime import get_profile
from kimi_bench.pipeline import make_step, producer_step, run_arm
from tests.decoders import FakeDeviceDecoder, fake_gpu_decoder

K3 = get_preset("kimi-k3")
CPU, CUDA = torch.device("cpu"), torch.device("cuda")
NEW, PR = get_profile("sglang-0.5.23"), get_profile("pr-33921")


def jpeg(size: tuple[int, int] = (64, 48), *, progressive: bool = False, mode: str = "RGB",
         subsampling: int = 2) -> bytes:  # fmt: skip
    img = Image.linear_gradient("L").resize(size)
    if mode == "RGB":
        img = Image.merge("RGB", (img, img.transpose(Image.Transpose.FLIP_LEFT_RIGHT), img))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=85, progressive=progressive, subsampling=subsampling)
    return buf.getvalue()


def png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (20, 10), (1, 2, 3)).save(buf, "PNG")
    return buf.getvalue()


def webp() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (20, 10), (1, 2, 3)).save(buf, "WEBP", lossless=True)
    return buf.getvalue()


# ------------------------------------------------------------------ which decoder, and why


def test_each_profile_names_its_runtime_decoder() -> None:
    assert (NEW.decoder, PR.decoder) == ("nvimgcodec", "nvjpeg")
    assert decoder("nvimgcodec").on_device and decoder("nvjpeg").on_device
    assert not decoder("pil").on_device


@pytest.mark.parametrize("profile", [NEW, PR], ids=lambda p: p.name)
def test_without_cuda_auto_is_pil_as_the_runtime(profile) -> None:
    choice = choose("auto", profile, CPU)
    assert choice.chosen.name == "pil"
    assert choice.reason == "no CUDA: PIL, as the runtime decodes without CUDA"


def test_on_cuda_without_nvimgcodec_the_runtime_falls_back_to_pil() -> None:
    if importlib.util.find_spec("nvidia") and importlib.util.find_spec("nvidia.nvimgcodec"):
        pytest.skip("nvImageCodec is installed here")
    choice = choose("auto", NEW, CUDA)
    assert choice.chosen.name == "pil"
    assert choice.reason.startswith(
        "sglang-0.5.23 on CUDA: nvimgcodec, but nvImageCodec not importable "
        "(nvidia.nvimgcodec; pip install 'kimi-bench[gpu-decode-cu"
    )
    assert choice.reason.endswith("]'): PIL, as the runtime falls back")


def test_a_named_decoder_that_cannot_run_says_why() -> None:
    choice = choose("nvjpeg", PR, CPU)
    assert choice.chosen.name == "pil" and choice.requested == "nvjpeg"
    assert "--decoder: nvjpeg, but no CUDA device: PIL" in choice.reason
    assert choose("pil", NEW, CUDA).reason == "--decoder: PIL (Image.open + load)"


def test_jpeg_framing_is_the_runtimes_test() -> None:
    data = jpeg()
    assert is_jpeg(data) and not is_jpeg(png()) and not is_jpeg(webp())
    assert not is_jpeg(data + b"\x00")  # bytes after the EOI: PIL, as the runtime
    assert not is_jpeg(data[:-2])  # no EOI (truncated)


def test_per_input_a_device_decoder_takes_jpegs_only() -> None:
    with fake_gpu_decoder():
        choice = choose("nvimgcodec", NEW, CPU)
        assert choice.chosen.on_device
        got = choice.decode(jpeg(), CPU)
        assert isinstance(got.image, DeviceImage) and got.decoder.name == "nvimgcodec"
        assert got.image.tensor.shape == (3, 48, 64)
        for data in (png(), webp(), jpeg() + b"tail"):
            other = choice.decode(data, CPU)
            assert isinstance(other.image, Image.Image) and other.decoder.name == "pil"
            assert other.reason == "not a JPEG (SOI ... EOI): PIL"


def test_a_jpeg_the_device_decoder_refuses_falls_back_to_pil() -> None:
    with fake_gpu_decoder(refuse=(b"JFIF",)):
        got = choose("nvimgcodec", NEW, CPU).decode(jpeg(), CPU)
    assert isinstance(got.image, Image.Image) and got.decoder.name == "pil"
    assert got.reason.startswith("nvimgcodec failed (DecodeError: the stand-in decoder")
    assert got.reason.endswith("): PIL")


def test_warm_decodes_once_before_traffic_on_a_device_decoder_only() -> None:
    calls: list[int] = []

    def counted(self, data, device):  # the stand-in's decode, counted
        calls.append(len(data))
        return FakeDeviceDecoder.decode(self, data, device)

    with fake_gpu_decoder(decode=counted):
        assert choose("nvimgcodec", NEW, CPU).warm(CPU) >= 0.0
    assert len(calls) == 1 and calls[0] > 0  # one small JPEG
    assert choose("pil", NEW, CPU).warm(CPU) == 0.0
    with fake_gpu_decoder(refuse=(b"JFIF",)):  # a decoder that fails is left to the inputs
        assert choose("nvimgcodec", NEW, CPU).warm(CPU) >= 0.0


def test_a_truncated_jpeg_gets_pils_answer() -> None:
    cut = jpeg()[:-200]
    with fake_gpu_decoder(), pytest.raises(OSError):
        choose("nvimgcodec", NEW, CPU).decode(cut, CPU)  # not framed: PIL, which refuses it


# ------------------------------------------------------------- what a GPU decode copies


def _rows(step) -> list[tuple[str, str, str, str, str]]:
    return [(r["stage"], r["op"], r["src"], r["dst"], r["mirrors"]) for r in step.ledger.rows()]


@pytest.mark.parametrize(
    ("profile", "d2h", "where"),
    [(NEW, "prepare_artifact_batch: .cpu().contiguous()", "producer"),
     (PR, "_precompute_hashes_before_cpu_transfer: .cpu()", "d2h")],
    ids=["0.5.23", "pr-33921"],
)  # fmt: skip
def test_deferred_brings_a_gpu_decode_to_the_host_once(profile, d2h, where) -> None:
    """0.5.23 brings it to the host when staging (its cache path), then hashes it there;
    the PR era hashes it on the GPU first (``set_pad_value``), then ``.cpu()``."""
    data = jpeg()
    with fake_gpu_decoder():
        step = make_step("deferred", K3, CPU, carrier_="shm", runtime=profile.name,
                         decoder="nvimgcodec")  # fmt: skip
        image = step.arm.load(step, data)
        produced = producer_step(step, [image], "kbtest-dec-")
    try:
        rows = _rows(step)
        stand_in, fake = " [no CUDA: host copy stands in]", "load_image: fake device decode"
        assert [r for r in rows if r[1] in ("h2d", "decode", "d2h")] == [
            ("producer", "h2d", "host", "device", f"{fake}: the encoded bytes{stand_in}"),
            ("producer", "decode", "device", "device", fake + stand_in),
            (where, "d2h", "device", "host", d2h + stand_in),
        ]
        bytes_by_op = {r["op"]: r["bytes"] for r in step.ledger.rows()}
        assert bytes_by_op["h2d"] == len(data) and bytes_by_op["d2h"] == 3 * 64 * 48
        ops = [r[1] for r in rows]
        assert "convert" not in ops and "to_numpy" not in ops and "hwc_to_chw" not in ops
        assert ops.count("shm_copy_in") == 1  # the D2H left it contiguous: one copy in
        assert step.decodes == [("nvimgcodec", "--decoder: a stand-in GPU decoder (tests)")]
    finally:
        from kimi_bench.pipeline.transport import cleanup_segments

        cleanup_segments("kbtest-dec-")
    assert produced.decisions[0].defer


def test_eager_keeps_a_gpu_decode_on_the_device() -> None:
    with fake_gpu_decoder():
        step = make_step("eager", K3, CPU, decoder="nvimgcodec")
        producer_step(step, [step.arm.load(step, jpeg(mode="L"))], "")
    rows = _rows(step)
    h2d = [r for r in rows if r[1] == "h2d"]
    assert [r[4] for r in h2d] == [
        "load_image: fake device decode: the encoded bytes [no CUDA: host copy stands in]"
    ]  # only the encoded bytes: no to_chw_uint8(device=cuda) copy of the pixels
    assert ("producer", "channel_repeat", "device", "device", "to_chw_uint8") in rows
    assert [r[1] for r in rows if r[0] == "d2h"] == ["d2h"]  # the FP32 patches, per item


def test_deferred_decode_owner_decodes_on_its_device_and_stays_bit_exact() -> None:
    datas = [jpeg(), jpeg((80, 40), progressive=True), jpeg((30, 20), mode="L")]
    with fake_gpu_decoder():
        choice = choose("nvimgcodec", NEW, CPU)
        decoded = [choice.decode(d, CPU).image for d in datas]
        plans = [plan_resize(im.width, im.height, K3) for im in decoded]
        eager = run_arm("eager", decoded, plans, K3, 2, CPU, CPU, decoder="nvimgcodec")
        arm = run_arm("deferred-decode", [EncodedImage(d) for d in datas], plans, K3, 2, CPU,
                      CPU, decoder="nvimgcodec")  # fmt: skip
    assert all(d.encoded for d in arm.decisions)
    for a, b in zip(eager.bf16, arm.bf16, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(eager.fp32, arm.fp32, strict=True):
        assert torch.equal(a, b)
    owner = [r for r in arm.ledger.rows() if r["stage"] == "owner_h2d"]
    assert sorted({r["op"] for r in owner}) == ["channel_repeat", "decode", "h2d"]
    assert all(r["mirrors"].startswith("load_image: fake device decode") for r in owner
               if r["op"] in ("h2d", "decode"))  # fmt: skip
    assert sum(r["count"] for r in owner if r["op"] == "h2d") == 3  # the encoded bytes only


def test_parity_holds_the_runtime_decoders_pixels_against_pils(tmp_path) -> None:
    """parity on a folder of JPEGs under a GPU decoder: both arms run on the runtime's
    pixels and stay bit-exact; each row says which decoder it got and how far its pixels
    and features are from PIL's; the summary line names the JPEGs that differ."""
    from kimi_bench.bench.parity import run_parity
    from kimi_bench.options import ParityOptions

    (tmp_path / "base.jpg").write_bytes(jpeg())
    (tmp_path / "prog.jpg").write_bytes(jpeg((96, 64), progressive=True))
    (tmp_path / "flat.png").write_bytes(png())
    opts = ParityOptions(images=tmp_path, device="cpu", decoder="nvimgcodec")
    with fake_gpu_decoder():
        report = run_parity(opts)
    rows = {r["name"]: r for r in report.results}
    assert all(r["bit_exact_fp32"] and r["bit_exact_bf16"] for r in rows.values())
    assert (rows["base.jpg"]["decoder"], rows["flat.png"]["decoder"]) == ("nvimgcodec", "pil")
    assert rows["flat.png"]["decoder_reason"] == "not a JPEG (SOI ... EOI): PIL"
    assert rows["base.jpg"]["jpeg"] == "baseline 4:2:0"
    assert rows["prog.jpg"]["jpeg"] == "progressive 4:2:0"
    assert rows["base.jpg"]["vs_pil_values_differ"] == 0
    assert rows["prog.jpg"]["vs_pil_values_differ"] > 0 and rows["prog.jpg"]["vs_pil_max_abs"] == 2
    assert rows["prog.jpg"]["vs_pil_bf16_max_abs"] > 0
    dec = report.summary["decoding"]
    assert dec["differ_from_pil"] == ["prog.jpg"] and dec["decoders"] == {"nvimgcodec": 2, "pil": 1}
    assert dec["line"].startswith("decoders nvimgcodec 2, pil 1: 1 of 2 JPEGs decode differently")
    assert "1 of 1 progressive" in dec["line"]
    assert report.summary["verdict"].startswith("BIT-IDENTICAL")


def test_serve_ab_counts_every_repeats_decodes_per_arm() -> None:
    from kimi_bench.bench.serve_runs import Placement, ServedRequest, ServeRun
    from kimi_bench.bench.variants import run_decodes

    def run(arm: str, repeat: int, n: int) -> ServeRun:
        at = Placement(float("inf"), "inf", repeat, 0, ())
        recs = [ServedRequest(rid=i, decodes=(("nvimgcodec", "on CUDA"),)) for i in range(n)]
        return ServeRun(arm, at, recs)

    runs = [run("eager", 0, 3), run("deferred", 0, 2), run("eager", 1, 4)]
    assert run_decodes(runs) == {
        "eager": {"nvimgcodec: on CUDA": 7},
        "deferred": {"nvimgcodec: on CUDA": 2},
    }
