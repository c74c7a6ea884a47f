"""Bad workloads given to the installed ``kimi-bench serve-ab`` (issue 43) are refused with
the file (and line) named, exit 2, before any server starts: an empty folder, a folder with
a file that is not an image, a JSONL line that is not a chat body, an image URL that does
not resolve on loopback."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

pytestmark = pytest.mark.slow  # each one imports torch in a fresh process


def _command() -> list[str]:
    exe = shutil.which("kimi-bench")
    return [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]


def _refused(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "out"
    res = subprocess.run(
        [*_command(), "serve-ab", *args, "--rates", "inf", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert not (out / "servers").exists()  # no emulator server was started
    assert not (out / "report.json").exists()
    return " ".join(res.stderr.split())  # unwrapped


def _png(path: Path) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (16, 12)).save(buf, format="PNG")
    path.write_bytes(buf.getvalue())


def test_an_empty_folder_and_a_file_that_is_not_an_image(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no JPEG, PNG or WebP image" in _refused(tmp_path, "--images", str(empty))
    photos = tmp_path / "photos"
    (photos / "more").mkdir(parents=True)
    _png(photos / "a.png")
    (photos / "more" / "readme.md").write_text("# not a photo")
    said = _refused(tmp_path, "--images", str(photos))
    assert "more/readme.md" in said and "not JPEG/PNG/WebP" in said


def test_a_jsonl_line_that_is_not_a_chat_body_and_a_dead_url(tmp_path: Path) -> None:
    ok = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps(ok) + "\n" + json.dumps({"prompt": "completion API"}) + "\n")
    said = _refused(tmp_path, "--requests-file", str(path))
    assert f"{path}:2" in said and "not a chat body" in said
    dead = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/gone.jpg"}}]}]}  # fmt: skip
    path.write_text(json.dumps(ok) + "\n" + json.dumps(dead) + "\n")
    said = _refused(tmp_path, "--requests-file", str(path))
    assert f"{path}:2" in said and "http://127.0.0.1:9/gone.jpg" in said
