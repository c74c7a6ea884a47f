"""``parity --images FOLDER`` with everything a folder can hold besides good images:
each entry is read or gets a row naming why not, nothing blocks, nothing is skipped
silently, and no tensor header makes the loader allocate what it claims."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.domain.corpus import dump_filename, folder_corpus
from kimi_bench.domain.corpus_files import InputError


def _npy_header_only(path: Path, shape: tuple[int, ...], payload: bytes = b"123") -> None:
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "|u1", "fortran_order": False, "shape": shape}
        )
        f.write(payload)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d, outside = tmp_path / "imgs", tmp_path / "outside"
    d.mkdir()
    outside.mkdir()
    Image.new("RGB", (30, 20), (10, 20, 30)).save(d / "a.png")
    Image.new("RGB", (30, 20), (200, 20, 30)).save(d / "a.jpg")
    frames = [Image.new("RGB", (16, 12), (i * 80, 0, 0)) for i in range(3)]
    frames[0].save(d / "anim.gif", save_all=True, append_images=frames[1:])
    Image.new("RGB", (9, 9)).save(outside / "secret.png")
    os.mkfifo(d / "pipe.png")
    (d / "sub").mkdir()
    Image.new("RGB", (9, 9)).save(d / "sub" / "nested.png")
    os.symlink(outside / "secret.png", d / "out_link.png")
    os.symlink(d / "a.png", d / "in_link.png")
    os.symlink(d / "missing.png", d / "broken.png")
    _npy_header_only(d / "claims_28gib.npy", (3, 100_000, 100_000))
    _npy_header_only(d / "truncated.npy", (3, 100, 100))
    np.save(d / "ok.npy", np.arange(3 * 20 * 30, dtype=np.uint8).reshape(3, 20, 30))
    torch.save(torch.zeros(1, dtype=torch.uint8).expand(3, 20_000, 20_000), d / "expanded.pt")
    torch.save(torch.arange(600, dtype=torch.int64).to(torch.uint8).reshape(1, 20, 30), d / "ok.pt")
    return d


WHY = {
    "pipe.png": "a FIFO (named pipe), not a regular file: not read",
    "sub/": "a subfolder: not read (only files directly in the --images folder are read)",
    "out_link.png": "outside the folder: not followed (--follow-links allows it)",
    "broken.png": "broken symbolic link: not read",
    "claims_28gib.npy": "pixel limit: tensor of shape (3, 100000, 100000) has 10,000,000,000",
    "expanded.pt": "pixel limit: tensor of shape (3, 20000, 20000) has 400,000,000 pixels",
    "truncated.npy": ".npy header promises 30,000 bytes of data for shape (3, 100, 100) but the",
}
READ = {"a.png", "a.jpg", "anim.gif", "in_link.png", "ok.npy", "ok.pt"}


def test_parity_on_a_hostile_folder_names_every_refusal(folder, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app, ["parity", "--images", str(folder), "--device", "cpu", "--out", str(out)]
    )
    assert "Traceback" not in res.output
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads((out / "report.json").read_text())["results"]}
    assert set(rows) == set(WHY) | READ
    for name, why in WHY.items():
        assert rows[name]["error"] is not None and why in rows[name]["error"], name
    for name in READ:
        assert rows[name]["error"] is None, (name, rows[name]["error"])
        assert rows[name]["bit_exact_fp32"] and rows[name]["bit_exact_bf16"]


def test_links_out_of_the_folder_are_followed_only_when_asked(folder):
    entries = {e.name: e for e in folder_corpus(folder, follow_links=True)}
    assert entries["out_link.png"].load().size == (9, 9)
    entries = {e.name: e for e in folder_corpus(folder)}
    with pytest.raises(InputError, match="outside the folder"):
        entries["out_link.png"].load()


def test_multi_frame_image_uses_frame_0_with_a_note(folder):
    (entry,) = [e for e in folder_corpus(folder) if e.name == "anim.gif"]
    im = entry.load()
    assert entry.note == "GIF with 3 frames: frame 0 used"
    assert im.convert("RGB").getpixel((0, 0)) == (0, 0, 0)  # frame 0 is black


def test_tensor_limit_follows_max_pixels(folder):
    entries = {e.name: e for e in folder_corpus(folder, max_pixels=500)}
    with pytest.raises(InputError, match="600 pixels > limit 500"):
        entries["ok.npy"].load()
    with pytest.raises(InputError, match="600 pixels > limit 500"):
        entries["ok.pt"].load()
    entries = {e.name: e for e in folder_corpus(folder, max_pixels=10**10)}
    with pytest.raises(InputError, match="header promises 30,000,000,000 bytes"):
        entries["claims_28gib.npy"].load()  # within the raised limit: the size check holds


def test_legacy_and_pickled_tensor_files_are_refused(tmp_path):
    torch.save(
        torch.zeros(3, 2, 2, dtype=torch.uint8),
        tmp_path / "legacy.pt",
        _use_new_zipfile_serialization=False,
    )
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    entries = {e.name: e for e in folder_corpus(tmp_path)}
    with pytest.raises(InputError, match="cannot read tensor file: mmap can only be used"):
        entries["legacy.pt"].load()
    with pytest.raises(InputError, match="holds Python objects"):
        entries["objects.npy"].load()


def test_dump_names_are_unique_per_input():
    names = ["a.png", "a.jpg", "a", "a b.png", "a_b.png", "../x.png"]
    files = [dump_filename(n) for n in names]
    assert len(set(files)) == len(files)
    assert files[:2] == ["a.png.pt", "a.jpg.pt"]
    assert all("/" not in f and not f.startswith(".") for f in files)


def test_dump_of_a_png_and_a_jpg_writes_two_files(tmp_path):
    d = tmp_path / "imgs"
    d.mkdir()
    Image.new("RGB", (30, 20), (10, 20, 30)).save(d / "a.png")
    Image.new("RGB", (30, 20), (200, 20, 30)).save(d / "a.jpg")
    dump = tmp_path / "dump"
    res = CliRunner().invoke(
        app,
        [
            "parity",
            "--images",
            str(d),
            "--device",
            "cpu",
            "--dump",
            str(dump),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in dump.iterdir()) == ["a.jpg.pt", "a.png.pt"]


def test_multi_frame_note_reaches_the_report_row(folder, tmp_path):
    out = tmp_path / "out"
    CliRunner().invoke(
        app, ["parity", "--images", str(folder), "--device", "cpu", "--out", str(out)]
    )
    rows = {r["name"]: r for r in json.loads((out / "report.json").read_text())["results"]}
    assert rows["anim.gif"]["warning"] == "GIF with 3 frames: frame 0 used"
