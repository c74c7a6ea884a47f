"""``micro`` with the deferred-decode arm (proposed, not in the runtime): encoded bytes
through the carriers, one decode per image on its owner, the owner's output identical to
eager, and the bytes and milliseconds against deferred and zero-copy in the report."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from kimi_bench.bench.micro import run_micro
from kimi_bench.engine.images import make_images
from kimi_bench.options import MicroOptions
from tests.unit.test_deferred_decode import ENCODED, ROUTED

ARMS = ("eager", "deferred", "zero-copy", "deferred-decode")


def _jpeg(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    return buf.getvalue()


def _copies(report, arm: str, op: str) -> list[dict]:
    return [c for c in report.data["arms"][arm]["copies"] if c["op"] == op]


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["shm", "pickle"])
def test_encoded_bytes_travel_and_each_owner_decodes_once(transport: str):
    opts = MicroOptions(synthetic="3x96x64", ranks=2, repeats=2, warmup=1, device="cpu",
                        transport=transport, arms=ARMS, content="blank")  # fmt: skip
    report = run_micro(opts)
    assert report.summary["bit_exact_all_repeats"] is True
    encoded = sum(len(_jpeg(im)) for im in make_images(opts.groups, "blank", 0))
    # one decode per image, on the owner only; the other arms decode at their producer
    dd_decodes = _copies(report, "deferred-decode", "decode")
    assert {c["stage"] for c in dd_decodes} == {"owner_h2d"}
    assert sum(c["count"] for c in dd_decodes) == 3
    for arm in ("eager", "deferred", "zero-copy"):
        assert {c["stage"] for c in _copies(report, arm, "decode")} == {"producer"}
    if transport == "shm":  # the carrier copies the encoded bytes, not the pixels
        assert sum(c["bytes"] for c in _copies(report, "deferred-decode", "shm_copy_in")) == (
            encoded
        )
    block = report.data["deferred_decode"]
    assert block["encoded_images"] == 3 and block["routed"] == []
    assert set(block["versus"]) == {"deferred", "zero-copy"}
    assert block["versus"]["deferred"]["carried_bytes_saved"] > 0
    assert block["owner_decode_ms"]["median"] > 0
    assert any(n.startswith("deferred-decode vs deferred: total") for n in report.notes)
    assert "speedup_deferred_decode_vs_deferred" in report.summary


@pytest.mark.slow
def test_a_folder_of_files_routes_what_the_header_cannot_vouch_for(tmp_path: Path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a.jpg").write_bytes(ENCODED["jpeg_exif_rotate_6"]())
    (folder / "b.png").write_bytes(ENCODED["png_rgba"]())
    (folder / "c.gif").write_bytes(ROUTED["gif"][0]())
    opts = MicroOptions(images=folder, ranks=2, repeats=1, warmup=0, device="cpu",
                        arms=("eager", "deferred-decode"))  # fmt: skip
    report = run_micro(opts)
    assert report.summary["bit_exact_all_repeats"] is True
    block = report.data["deferred_decode"]
    assert (block["encoded_images"], block["images"]) == (2, 3)
    assert any("format GIF" in why for why in block["routed"])
    stages = {c["stage"] for c in _copies(report, "deferred-decode", "decode")}
    assert stages == {"producer", "owner_h2d"}  # the routed GIF decodes at the producer
