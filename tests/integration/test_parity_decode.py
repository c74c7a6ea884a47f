"""``parity`` on a folder of real encoded files: the deferred-decode arm (proposed, not in
the runtime) is bit-identical to eager on every file it ships encoded, and names the
reason for every file it routes to raw uint8."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from tests.unit.test_deferred_decode import ENCODED, ROUTED

runner = CliRunner()

FILES = {
    "a_exif6.jpg": ENCODED["jpeg_exif_rotate_6"],
    "b_cmyk.jpg": ENCODED["jpeg_cmyk"],
    "c_progressive.jpg": ENCODED["jpeg_progressive"],
    "d_palette_trns.png": ENCODED["png_palette_transparency"],
    "e_16bit.png": ENCODED["png_16bit"],
    "f_rgba.png": ENCODED["png_rgba"],
    "g_gray.jpg": ENCODED["jpeg_gray"],
    "h_lossy.webp": ENCODED["webp_lossy"],
    "i_anim.gif": ROUTED["gif"][0],
    "j_noise.png": ROUTED["png_noise"][0],
}


def test_a_folder_of_encoded_files_is_bit_identical_or_routed(tmp_path: Path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    for name, make in FILES.items():
        (folder / name).write_bytes(make())
    np.save(folder / "k_tensor.npy", np.zeros((3, 20, 30), dtype=np.uint8))
    out = tmp_path / "out"
    res = runner.invoke(
        app, ["parity", "--device", "cpu", "--images", str(folder), "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    rows = {r["name"]: r for r in report["results"]}
    for name in FILES:
        r = rows[name]
        assert r["error"] is None, r
        assert r["decode_bit_exact_fp32"] and r["decode_bit_exact_bf16"], r
    encoded = {n for n, r in rows.items() if r["decode_path"] == "encoded"}
    assert encoded == set(list(FILES)[:8])
    assert "format GIF" in rows["i_anim.gif"]["decode_reason"]
    assert "nothing saved" in rows["j_noise.png"]["decode_reason"]
    assert "no encoded form" in rows["k_tensor.npy"]["decode_reason"]
    s = report["summary"]["deferred_decode"]
    assert s["label"] == "proposed, not in the runtime"
    assert (s["encoded"], s["routed_raw"], s["differing"]) == (8, 3, [])
    assert s["encoded_bytes"] < s["raw_bytes_of_encoded"]
    assert "deferred-decode (proposed): 8 travelled encoded" in report["summary"]["verdict"]
