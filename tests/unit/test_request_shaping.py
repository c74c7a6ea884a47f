"""How serve-ab shapes what real servers are sent (issue 43): --ignore-eos in each server's
spelling, --extra-body and --header merged into every request, the emulator's image URLs
fetched from loopback only, and the loopback file server that serves a run's images."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import httpx
import pytest

from kimi_bench.bench.serve_http import HttpServeOptions
from kimi_bench.options import ServeOptions
from kimi_bench.serving.client import request_bodies
from kimi_bench.serving.eos import COMMON, TRANSFORMERS, ignore_eos_fields
from kimi_bench.serving.file_server import serve_images
from kimi_bench.serving.image_urls import image_payload
from kimi_bench.serving.request import Target
from kimi_bench.serving.workload.trace import workload_trace


def _http(**kw: object) -> HttpServeOptions:
    opts = ServeOptions(endpoints=("a=http://127.0.0.1:1",), rates=(math.inf,), requests=3,
                        resolution=(32, 24), max_tokens=7, **kw)  # fmt: skip
    return HttpServeOptions.from_options(opts, None, None)


def test_ignore_eos_is_spelled_as_each_server_takes_it() -> None:
    assert ignore_eos_fields(COMMON, 7) == {"ignore_eos": True}
    fields = ignore_eos_fields(TRANSFORMERS, 7)
    assert json.loads(fields["generation_config"]) == {"min_new_tokens": 7}
    http = _http(ignore_eos=True, extra_body='{"top_k": 1}', headers=("X-Run: 43",))
    sglang, tf = http.client_options("m"), http.client_options("m", TRANSFORMERS)
    trace = workload_trace(http.workload, (0.0, 0.0, 0.0))
    for client, field in ((sglang, "ignore_eos"), (tf, "generation_config")):
        for body in (json.loads(b) for b in request_bodies(trace, client)):
            assert body["top_k"] == 1 and body["max_tokens"] == 7
            assert {k: body[k] for k in (field,)} == ignore_eos_fields(client.ignore_eos_as, 7)
    plain = _http().client_options("m")  # off unless asked
    assert plain.extra_body == {} and plain.ignore_eos_as is None
    assert "ignore_eos" not in json.loads(request_bodies(trace, plain)[0])


def test_min_new_tokens_follows_each_requests_own_max_tokens() -> None:
    """transformers serve's spelling of --ignore-eos is a number: a request file's line
    with its own max_tokens gets min_new_tokens equal to that, not --max-tokens."""
    http = _http(ignore_eos=True)
    trace = workload_trace(http.workload, (0.0, 0.0, 0.0))
    trace = replace(trace, max_tokens=(3, None, 12))
    bodies = [json.loads(b) for b in request_bodies(trace, http.client_options("m", TRANSFORMERS))]
    assert [b["max_tokens"] for b in bodies] == [3, 7, 12]
    wanted = [json.loads(b["generation_config"])["min_new_tokens"] for b in bodies]
    assert wanted == [3, 7, 12]


def test_extra_body_and_headers_reach_every_request() -> None:
    http = _http(extra_body={"top_k": 1}, headers=("X-Run: 43", "X-Team:traffic"))
    client = http.client_options("m")
    trace = workload_trace(http.workload, (0.0, 0.0, 0.0))
    bodies = [json.loads(b) for b in request_bodies(trace, client)]
    assert all(b["top_k"] == 1 and b["max_tokens"] == 7 for b in bodies)
    target = Target("http://127.0.0.1:1", client, request_bodies(trace, client))
    head = target.requests[0].split(b"\r\n\r\n", 1)[0].decode()
    assert "X-Run: 43" in head and "X-Team: traffic" in head


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]"])
def test_extra_body_must_be_a_json_object(bad: str) -> None:
    with pytest.raises(ValueError, match="--extra-body"):
        ServeOptions(extra_body=bad)
    with pytest.raises(ValueError, match="KEY:VALUE"):
        ServeOptions(headers=("no-colon",))


def test_the_file_server_serves_the_pool_and_the_emulator_fetches_loopback_only() -> None:
    with serve_images([b"\x89PNG-a", b"\xff\xd8jpeg-b"], ["image/png", "image/jpeg"]) as urls:
        assert urls[0].endswith(".png") and urls[1].endswith(".jpg")
        assert image_payload(urls[1]) == b"\xff\xd8jpeg-b"
        missing = urls[0].rsplit("/", 1)[0] + "/9.png"
        assert httpx.get(missing, trust_env=False).status_code == 404
        with pytest.raises(ValueError, match="HTTP 404"):
            image_payload(missing)
    with pytest.raises(ValueError, match="fetches no other host"):
        image_payload("http://example.com/cat.jpg")
