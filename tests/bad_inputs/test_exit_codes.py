"""Exit codes as the README's table has them: ``kimi-bench serve`` that cannot bind is a
usage error (2) before it says where it serves; serve-ab whose endpoint always answers 429
or has nothing listening ran and counted its failures (1); micro given an image that does
not decode refuses it up front (2), naming it, before any process starts."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from kimi_bench.serving.launch import bind_socket, free_port
from tests.bad_inputs.cli import flat, kimi
from tests.peers import bad_server

WHERE_LINE = "kimi-bench serve: arm"  # the line that says where it serves
SMALL = ["--num-prompts", "2", "--request-rate", "inf", "--warmup-requests", "0"]


@pytest.mark.slow  # a kimi-bench serve process
def test_serve_on_a_port_in_use_exits_2_before_saying_where() -> None:
    with contextlib.closing(bind_socket("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        res = kimi("serve", "--arm", "deferred", "--port", str(port), timeout=120)
    assert res.returncode == 2, flat(res)
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in flat(res)
    assert WHERE_LINE not in flat(res) and "Traceback" not in flat(res)


@pytest.mark.slow  # a kimi-bench serve process per host
@pytest.mark.parametrize("host", ["999.1.1.1", "no-such-host.invalid"])
def test_serve_on_a_host_it_cannot_bind_exits_2_before_saying_where(host: str) -> None:
    res = kimi("serve", "--arm", "deferred", "--host", host, "--port", "0", timeout=120)
    assert res.returncode == 2, flat(res)
    assert f"cannot listen on {host}:0" in flat(res)
    assert WHERE_LINE not in flat(res) and "Traceback" not in flat(res)


@pytest.fixture(scope="module")
def peer() -> Iterator[str]:
    with bad_server.running(free_port()) as url:
        yield url


@pytest.mark.slow
def test_serve_ab_whose_endpoint_always_answers_429_exits_1(peer: str, tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = kimi("serve-ab", "--endpoint", f"busy={peer}/http429", *SMALL, "--output-dir", str(out))
    assert res.returncode == 1, flat(res)  # it ran; every request failed and was counted
    assert "busy: 2 of 2 requests failed (http x2: HTTP 429" in flat(res)
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["failed_requests"] == 2


@pytest.mark.slow
def test_serve_ab_with_nothing_listening_exits_1_with_its_report(tmp_path: Path) -> None:
    out, url = tmp_path / "o", f"http://127.0.0.1:{free_port()}"
    res = kimi("serve-ab", "--endpoint", f"gone={url}", *SMALL, "--output-dir", str(out))
    assert res.returncode == 1, flat(res)
    assert f"arm gone: cannot reach {url}" in flat(res)
    assert json.loads((out / "report.json").read_text())["summary"]["error"]


@pytest.mark.slow
def test_micro_refuses_an_image_that_does_not_decode_before_starting(tmp_path: Path) -> None:
    images = tmp_path / "img"
    images.mkdir()
    buf = io.BytesIO()
    Image.effect_noise((64, 48), 40).convert("RGB").save(buf, "JPEG")
    (images / "good.jpg").write_bytes(buf.getvalue())
    (images / "cut.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    out = tmp_path / "o"
    res = kimi("micro", "--images", str(images), "--ranks", "1", "--device", "cpu",
               "--output-dir", str(out))  # fmt: skip
    assert res.returncode == 2, flat(res)
    assert f"--images {images / 'cut.jpg'}: corrupt or truncated image" in flat(res)
    assert "micro cannot use it (parity gives it its own row)" in flat(res)
    assert not out.exists()  # refused before the output folder, the estimate, any worker
    assert "estimate" not in flat(res)
