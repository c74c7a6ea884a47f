"""``kimi-bench serve`` as a real process against hostile clients: a decompression-bomb
PNG, a body over the limit, images that are not images or do not decode, a body that is
not JSON, a client that leaves mid-stream, and SIGTERM / Ctrl-C while a stream is open.
Each answer is checked to the exact status and JSON error; the server's log holds one
line per refusal and never a traceback; stopping it leaves no process, orphan or
shared-memory segment behind."""

from __future__ import annotations

import io
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from PIL import Image

from kimi_bench.pipeline.transport import list_segments
from kimi_bench.serving.launch import ServerProcess
from tests.serve_helpers import (
    CHAT,
    adopting_orphans,
    chat_body,
    jpeg,
    marked_processes,
    mp_helpers,
    png_bomb,
    requests_by_outcome,
    serve_process,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("server_inputs")]

MAX_BODY_MB = 2  # the served limit: --max-body-mb 2


class Served:
    """A running server and a cursor into its log (what the current test added)."""

    def __init__(self, proc: ServerProcess, url: str) -> None:
        self.proc, self.url = proc, url
        self.client = httpx.Client(base_url=url, timeout=120, trust_env=False)
        self._seen = 0

    def new_log(self) -> str:
        text = self.proc.log.read_text(errors="replace")
        new, self._seen = text[self._seen :], len(text)
        return new


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    extra = ["--arm", "deferred", "--max-body-mb", str(MAX_BODY_MB)]
    extra += ["--decode-interval-ms", "20"]
    proc, url, _mark = serve_process(tmp_path_factory.mktemp("serve"), *extra)
    with proc:
        s = Served(proc, url)
        s.new_log()
        yield s
        s.client.close()
    assert "Traceback" not in proc.log.read_text(errors="replace")


def _refused_lines(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if "refused a request" in ln]


def _error(status: int, message: str, param: str | None = None) -> dict:
    kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def test_a_bomb_png_is_refused_from_its_header_with_one_log_line(served: Served) -> None:
    r = served.client.post(CHAT, json=chat_body([png_bomb(12000, 12000)]))
    assert r.status_code == 400
    message = (
        "image 0 (messages[0].content[1]) is 12000x12000 = 144,000,000 pixels, over the "
        "limit of 100,000,000 per image (kimi-bench serve --max-pixels)"
    )
    assert r.json() == _error(400, message, "messages[0].content[1]")
    log = served.new_log()
    assert [ln.split("): ", 1)[1] for ln in _refused_lines(log)] == [message]
    assert "Traceback" not in log and "DecompressionBomb" not in log
    # nothing reached the pipeline: no stage ran, the server still serves
    ok = served.client.post(CHAT, json=chat_body([jpeg(1)]))
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"]


def test_a_body_over_the_limit_is_a_413(served: Served) -> None:
    size = MAX_BODY_MB * 2**20 + 1
    r = served.client.post(CHAT, content=b"{" * size, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json() == _error(
        413,
        f"the request body has {size:,} bytes (Content-Length), over the limit of "
        f"{MAX_BODY_MB * 2**20:,} bytes (kimi-bench serve --max-body-mb)",
    )
    log = served.new_log()
    assert len(_refused_lines(log)) == 1 and "HTTP 413" in log and "Traceback" not in log


def test_a_file_that_is_not_an_image_is_refused_by_the_server(served: Served) -> None:
    r = served.client.post(CHAT, json=chat_body([jpeg(2), b"GIF89a and nothing after"]))
    assert r.status_code == 400
    message = (
        "image 1 (messages[0].content[2]) is not an image file PIL can read: "
        "PIL does not recognise its format"
    )
    assert r.json() == _error(400, message, "messages[0].content[2]")
    log = served.new_log()
    assert [ln.split("): ", 1)[1] for ln in _refused_lines(log)] == [message]
    assert "Traceback" not in log


def test_an_image_that_does_not_decode_is_a_400_from_the_producer(served: Served) -> None:
    buf = io.BytesIO()
    Image.effect_noise((320, 240), 60).convert("RGB").save(buf, "JPEG")
    truncated = buf.getvalue()[: buf.tell() // 2]  # a valid header, half the data
    r = served.client.post(CHAT, json=chat_body([truncated]))
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == 400
    assert error["message"].startswith("the producer rejected the request: OSError: image file")
    assert "Traceback" not in served.new_log()
    assert served.client.post(CHAT, json=chat_body([jpeg(3)])).status_code == 200


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"model": ', "bad request: the body is not JSON: Expecting value: line 1 column 11"),
        (b"\xc3\x28", "bad request: the body is not JSON: 'utf-8' codec can't decode"),
        (b"[1, 2]", "bad request: the request body must be a JSON object"),
    ],
)
def test_a_body_that_is_not_a_chat_request_is_a_400(
    served: Served, content: bytes, message: str
) -> None:
    r = served.client.post(CHAT, content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith(message)
    assert r.json()["error"]["type"] == "invalid_request_error"
    log = served.new_log()
    assert len(_refused_lines(log)) == 1 and "Traceback" not in log


def test_clients_that_leave_are_counted_quietly(served: Served) -> None:
    c = served.client
    before = requests_by_outcome(c.get("/metrics").text)
    # leaves mid-stream
    with c.stream("POST", CHAT, json=chat_body([jpeg(4)], 2000, stream=True)) as r:
        assert r.status_code == 200
        lines = [ln for _, ln in zip(range(8), r.iter_lines(), strict=False)]
    assert any('"content": " the"' in ln for ln in lines)
    # leaves half way through sending its body
    raw = json.dumps(chat_body([jpeg(5)], stream=True)).encode()
    head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(raw)}\r\n\r\n".encode()
    with socket.create_connection((c.base_url.host, c.base_url.port)) as s:
        s.sendall(head + raw[: len(raw) // 2])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert c.get("/health").json() == {"status": "ok"}  # answers all along
        after = requests_by_outcome(c.get("/metrics").text)
        if after["disconnected"] - before["disconnected"] == 2:
            break
        time.sleep(0.1)
    assert after["disconnected"] - before["disconnected"] == 2
    assert after["ok"] == before["ok"]
    log = served.new_log()
    assert log.strip() == "", log  # quiet: not a line, no traceback


def _stream_until_stopped(url: str, events: list[str], first: threading.Event) -> None:
    with (
        httpx.Client(base_url=url, timeout=120, trust_env=False) as c,
        connect_sse(c, "POST", CHAT, json=chat_body([jpeg(6)], 4000, stream=True)) as src,
    ):
        for e in src.iter_sse():
            events.append(e.data)
            first.set()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_while_a_stream_is_open_ends_it_cleanly(tmp_path: Path, sig: int) -> None:
    proc, url, mark = serve_process(
        tmp_path, "--arm", "eager", "--decode-interval-ms", "20", ranks=2
    )
    events: list[str] = []
    first = threading.Event()
    with adopting_orphans() as orphans, proc:
        assert proc.proc is not None
        pid = proc.proc.pid
        reader = threading.Thread(target=_stream_until_stopped, args=(url, events, first))
        reader.start()
        assert first.wait(120)
        # the server, multiprocessing's helpers, 2 ranks and a producer
        assert len(marked_processes(mark)) == 1 + mp_helpers() + 3
        proc.proc.send_signal(sig)
        code = proc.proc.wait(60)
        reader.join(60)
        assert orphans() == []  # every process under the server reaped before it exited
    log = proc.log.read_text(errors="replace")
    assert code == 0, log
    assert json.loads(events[-1]) == {
        "error": {
            "message": "the server is shutting down",
            "type": "server_error",
            "param": None,
            "code": 503,
        }
    }
    assert "[DONE]" not in events
    name = signal.Signals(sig).name + (" (Ctrl-C)" if sig == signal.SIGINT else "")
    lines = log.strip().splitlines()
    assert lines[-1] == f"kimi-bench serve: stopped on {name}; 1 request(s): 1 cancelled"
    assert len(lines) == 2, log  # the start line and the stop line, nothing else
    assert "Traceback" not in log and "CancelledError" not in log
    assert marked_processes(mark) == []
    assert list_segments(f"kimibench_{pid}_") == []
