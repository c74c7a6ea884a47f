"""One decode per input, as the runtime decodes a request once before the deferral
decision: parity feeds every arm that one decode, decodes each JPEG a second time, and
names a decoder that returns different pixels for the same bytes apart from
eager-vs-deferred exactness (``bench/parity_pixels.py``)."""

from __future__ import annotations

import io
import itertools
from typing import Any

import torch
from PIL import Image

from kimi_bench.bench.parity import exit_code, run_parity
from kimi_bench.bench.parity_pixels import NOT_DETERMINISTIC
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.decoders import DeviceImage, choose, replayed
from kimi_bench.domain.navit import plan_resize
from kimi_bench.domain.runtime import get_profile
from kimi_bench.options import ParityOptions
from kimi_bench.pipeline import run_arm
from tests.decoders import FakeDeviceDecoder, fake_gpu_decoder

CPU = torch.device("cpu")
K3 = get_preset("kimi-k3")


class Unsteady(FakeDeviceDecoder):
    """A GPU decoder stand-in whose every call moves one pixel by a different amount."""

    calls = itertools.count(1)

    def decode(self, data: bytes, device: torch.device) -> Any:
        img = super().decode(data, device)
        t = img.tensor.clone()
        t[0, 0, 0] = (int(t[0, 0, 0]) + next(self.calls)) % 256
        return DeviceImage(t, self.name)


def jpeg(size: tuple[int, int], seed: int) -> bytes:
    g = torch.Generator().manual_seed(seed)
    arr = torch.randint(0, 256, (size[1], size[0], 3), generator=g, dtype=torch.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr.numpy()).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def test_a_replayed_choice_decodes_each_input_once() -> None:
    data = jpeg((40, 30), 1)
    with fake_gpu_decoder(base=Unsteady, calls=itertools.count(1)):
        choice = replayed(choose("nvimgcodec", get_profile("sglang-0.5.23"), CPU))
        first, again = choice.decode(data, CPU), choice.decode(data, CPU)
        fresh = choice.again(data, CPU)
    assert first is again  # the one decode, handed out twice
    assert not torch.equal(first.image.tensor, fresh.image.tensor)  # a fresh decode differs


def test_eager_and_deferred_stay_exact_on_the_one_decode() -> None:
    datas = [jpeg((64, 48), 2), jpeg((50, 70), 3)]
    with fake_gpu_decoder(base=Unsteady, calls=itertools.count(1)):
        choice = replayed(choose("nvimgcodec", get_profile("sglang-0.5.23"), CPU))
        objs = [choice.decode(d, CPU).image for d in datas]
        plans = [plan_resize(o.width, o.height, K3) for o in objs]
        eager = run_arm("eager", objs, plans, K3, 2, CPU, CPU, decoder=choice)
        deferred = run_arm("deferred", objs, plans, K3, 2, CPU, CPU, decoder=choice)
    assert all(d.defer for d in deferred.decisions)
    for a, b in zip(eager.fp32 + eager.bf16, deferred.fp32 + deferred.bf16, strict=True):
        assert torch.equal(a, b)


def test_parity_names_a_decoder_that_is_not_deterministic(tmp_path) -> None:
    (tmp_path / "a.jpg").write_bytes(jpeg((64, 48), 4))
    (tmp_path / "b.jpg").write_bytes(jpeg((48, 64), 5))
    buf = io.BytesIO()
    Image.new("RGB", (20, 10), (1, 2, 3)).save(buf, "PNG")
    (tmp_path / "c.png").write_bytes(buf.getvalue())
    opts = ParityOptions(images=tmp_path, device="cpu", decoder="nvimgcodec",
                         runtime="sglang-0.5.23")  # fmt: skip
    with fake_gpu_decoder(base=Unsteady, calls=itertools.count(1)):
        report = run_parity(opts)
    rows = {r["name"]: r for r in report.results}
    # eager vs deferred (and the encoded-input arm) exact on the one decode of each input
    assert all(r["bit_exact_fp32"] and r["bit_exact_bf16"] for r in rows.values())
    assert all(r["decode_bit_exact_fp32"] and r["decode_bit_exact_bf16"] for r in rows.values())
    assert [rows[n]["decoder_deterministic"] for n in ("a.jpg", "b.jpg", "c.png")] == [
        False, False, None,
    ]  # fmt: skip
    assert report.summary["decoding"]["not_deterministic"] == ["a.jpg", "b.jpg"]
    verdict = report.summary["verdict"]
    assert verdict.startswith("BIT-IDENTICAL: 3 of 3")
    assert f"DECODER NOT DETERMINISTIC on a.jpg, b.jpg: {NOT_DETERMINISTIC}" in verdict
    assert exit_code(report) == 0  # the deferral is exact; the decoder is named apart


def test_a_steady_decoder_is_called_deterministic(tmp_path) -> None:
    (tmp_path / "a.jpg").write_bytes(jpeg((64, 48), 6))
    opts = ParityOptions(images=tmp_path, device="cpu", decoder="nvimgcodec")
    with fake_gpu_decoder():
        report = run_parity(opts)
    assert report.results[0]["decoder_deterministic"] is True
    assert report.summary["decoding"]["not_deterministic"] == []
    assert "NOT DETERMINISTIC" not in report.summary["verdict"]
