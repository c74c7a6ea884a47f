"""Workloads as data (issue 43): the text forms of sizes, counts and formats; a workload built
from synthetic distributions, a folder or a JSONL request file, seeded and the same every
time; repeats at the asked share; bad inputs refused with the file and line named."""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from kimi_bench.options import ServeOptions
from kimi_bench.options.workload_specs import (
    SizeRange,
    WorkloadError,
    parse_counts,
    parse_formats,
    parse_sizes,
)
from kimi_bench.serving.file_server import serve_images
from kimi_bench.serving.workload import build_workload, summarize
from kimi_bench.serving.workload.build import slot_plan
from kimi_bench.serving.workload.folder import scan_folder
from kimi_bench.serving.workload.trace import workload_trace


def _png(w: int, h: int, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (10, 20, 30)).save(buf, format=fmt)
    return buf.getvalue()


def _no_folder(text: str) -> list[tuple[int, int]]:
    raise AssertionError("no folder expected")


def test_size_range_draws_inside_its_bounds() -> None:
    dist = parse_sizes("random:256x128-2048x1024", _no_folder)
    assert isinstance(dist, SizeRange)
    sizes = dist.draw(np.random.default_rng(0), 500)
    ws, hs = [w for w, _ in sizes], [h for _, h in sizes]
    assert min(ws) >= 256 and max(ws) <= 2048 and min(hs) >= 128 and max(hs) <= 1024
    assert len(set(sizes)) > 400  # a range, not a handful of values


def test_weighted_sizes_follow_their_weights() -> None:
    dist = parse_sizes("640x480:3,1536x1024:1", _no_folder)
    drawn = dist.draw(np.random.default_rng(1), 4000)
    share = drawn.count((640, 480)) / len(drawn)
    assert set(drawn) == {(640, 480), (1536, 1024)} and 0.70 < share < 0.80


def test_folder_sizes_are_the_folders(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(_png(30, 20))
    (tmp_path / "b.jpg").write_bytes(_png(50, 40, "JPEG"))
    dist = parse_sizes(f"folder:{tmp_path}", lambda d: [(30, 20), (50, 40)])
    assert set(dist.draw(np.random.default_rng(0), 50)) == {(30, 20), (50, 40)}


@pytest.mark.parametrize(
    ("text", "says"),
    [("random:256x256", "random:WxH-WxH"), ("random:900x900-100x100", "larger than the end"),
     ("640x480:0", "a number > 0"), ("640-480", "WIDTHxHEIGHT")],
)  # fmt: skip
def test_bad_sizes_are_refused_by_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(WorkloadError, match=says):
        parse_sizes(text, _no_folder)


def test_counts_as_a_range_or_weights() -> None:
    assert parse_counts("1-4").values == (1, 2, 3, 4)
    mix = parse_counts("1:5,4:1")
    drawn = mix.draw(np.random.default_rng(0), 3000)
    assert set(drawn) == {1, 4} and 0.78 < drawn.count(1) / 3000 < 0.89
    with pytest.raises(WorkloadError, match=r"1\.\.64"):
        parse_counts("0-3")
    assert parse_formats("jpg:3,png:1").values == ("jpeg", "png")
    with pytest.raises(WorkloadError, match="one of jpeg, png, webp"):
        parse_formats("gif")


def test_images_per_request_range_keeps_the_largest_count() -> None:
    opts = ServeOptions(images_per_request="1-4")
    assert opts.image_count_mix == "1-4" and opts.images_per_request == 4
    assert ServeOptions(images_per_request="3").image_count_mix is None
    with pytest.raises(ValueError, match="give one of --images, --image-sizes"):
        ServeOptions(images=Path("."), image_sizes="640x480")


def test_a_synthetic_workload_is_the_same_every_time_and_mixed() -> None:
    opts = ServeOptions(image_sizes="random:64x64-300x200", images_per_request="1-4",
                        image_format="jpeg:1,png:1,webp:1", unique_images=12)  # fmt: skip
    a, b = build_workload(opts, 30), build_workload(opts, 30)
    assert [r.keys for r in a.requests] == [r.keys for r in b.requests]
    assert [p.data for p in a.pool] == [p.data for p in b.pool]
    summary = summarize(a)
    assert set(summary["images_per_request"]) == {"1", "2", "3", "4"}
    assert set(summary["formats"]) == {"jpeg", "png", "webp"}
    for p in a.pool:  # each image is what its entry says
        with Image.open(io.BytesIO(p.data)) as im:
            assert im.size == (p.width, p.height) and im.format.lower() == p.format
    other = build_workload(opts.model_copy(update={"seed": 1}), 30)
    assert [r.keys for r in other.requests] != [r.keys for r in a.requests]


def test_a_content_mix_draws_each_generated_image_from_it() -> None:
    """``--image-content blank:1,random:1``: each generated image is one of them (a blank
    one is one grey; a random one is noise), seeded; one content draws nothing, so a
    workload of one content is what it was before mixes existed."""
    opts = ServeOptions(image_sizes="32x24:1,24x32:1", image_content="blank:1,random:1",
                        image_format="png", unique_images=24)  # fmt: skip
    work = build_workload(opts, 24)
    assert summarize(work)["contents"] == {
        c: sum(p.content == c for p in work.pool) for c in ("blank", "random")
    }
    for p in work.pool:
        colours = Image.open(io.BytesIO(p.data)).convert("RGB").getcolors(64)
        grey = colours is not None and len(colours) == 1
        assert grey == (p.content == "blank")
    assert {(p.origin, p.content) for p in work.pool} == {
        ("generated", "blank"), ("generated", "random")}  # fmt: skip
    same = build_workload(opts, 24)
    assert [p.data for p in same.pool] == [p.data for p in work.pool]
    plain = opts.model_copy(update={"image_content": "random"})
    mixed_sizes = [(p.width, p.height) for p in work.pool]
    assert [(p.width, p.height) for p in build_workload(plain, 24).pool] == mixed_sizes
    with pytest.raises(ValueError, match="bad image content 'cats'"):
        ServeOptions(image_content="photo:1,cats:2")


@pytest.mark.parametrize("share", [0.0, 0.25, 0.6])
def test_repeat_share_is_the_share_of_images_that_repeat(share: float) -> None:
    counts = [1, 2, 3, 4] * 10  # 100 slots
    slots, fresh = slot_plan(counts, share, 16, seed=3)
    seen: set[int] = set()
    repeats = 0
    for s in slots:
        repeats += s in seen
        seen.add(s)
    assert repeats == round(share * 100) and fresh == len(seen) == 100 - repeats
    assert slots[0] == 0  # the first slot never repeats


def test_without_repeat_share_the_pool_is_taken_in_turn() -> None:
    slots, fresh = slot_plan([2, 2, 2], None, 4, seed=0)
    assert slots == [0, 1, 2, 3, 0, 1] and fresh == 4


def test_a_folder_is_read_recursively_and_its_images_served_in_a_seeded_order(
    tmp_path: Path,
) -> None:
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "a.png").write_bytes(_png(20, 10))
    (tmp_path / "deep" / "b.jpg").write_bytes(_png(30, 10, "JPEG"))
    (tmp_path / "deep" / "er" / "c.webp").write_bytes(_png(40, 10, "WEBP"))
    (tmp_path / ".DS_Store").write_bytes(b"junk")
    folder = scan_folder(tmp_path)
    assert sorted(i.width for i in folder.images) == [20, 30, 40] and folder.hidden_skipped == 1
    work = build_workload(ServeOptions(images=tmp_path, images_per_request=2, requests=3), 3)
    summary = summarize(work)
    assert summary["source"]["kind"] == "folder" and summary["images"] == 6
    assert summary["distinct_images"] == 3 and summary["repeated_images"] == 3
    assert summary["formats"] == {"jpeg": 2, "png": 2, "webp": 2}


def test_a_folder_with_a_file_that_is_not_an_image_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "ok.png").write_bytes(_png(8, 8))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("not an image")
    with pytest.raises(WorkloadError, match=r"sub/notes\.txt"):
        scan_folder(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WorkloadError, match="no JPEG, PNG or WebP image"):
        scan_folder(empty)


def _line(*parts: dict, max_tokens: int | None = 5, **extra: object) -> str:
    body: dict = {"model": "m", "messages": [{"role": "user", "content": list(parts)}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return json.dumps(body | extra)


def _url(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def test_a_jsonl_file_with_data_urls_paths_and_loopback_urls(tmp_path: Path) -> None:
    (tmp_path / "p.png").write_bytes(_png(12, 9))
    data = "data:image/jpeg;base64," + base64.b64encode(_png(7, 5, "JPEG")).decode()
    with serve_images([_png(33, 22)], ["image/png"]) as (url,):
        lines = [
            _line({"type": "text", "text": "what is it"}, _url(data), timestamp=1.5),
            _line(
                {"type": "text", "text": "and this"},
                _url("p.png"),
                _url(url),
                max_tokens=None,
                timestamp=2.0,
            ),
        ]
        path = tmp_path / "reqs.jsonl"
        path.write_text("\n".join(lines) + "\n\n")
        opts = ServeOptions(requests_file=path, replay_timestamps=True)
        work = build_workload(opts, 2)
    assert [r.prompt for r in work.requests] == ["what is it", "and this"]
    assert [r.max_tokens for r in work.requests] == [5, None]
    assert sorted((p.width, p.height) for p in work.pool) == [(7, 5), (12, 9), (33, 22)]
    assert work.timestamps == (0.0, 0.5)
    trace = workload_trace(work, work.timestamps or ())
    assert trace.request_max_tokens(0) == 5 and trace.request_prompt(1) == "and this"


@pytest.mark.parametrize(
    ("line", "says"),
    [("{not json", "not JSON"), ('{"model": "m"}', "not a chat body"),
     (_line(_url("missing.png")), "missing.png"),
     (_line(_url("http://127.0.0.1:9/x.png")), "cannot fetch")],
)  # fmt: skip
def test_a_bad_jsonl_line_is_refused_with_its_file_and_line(
    tmp_path: Path, line: str, says: str
) -> None:
    path = tmp_path / "reqs.jsonl"
    good = _line({"type": "text", "text": "hi"})
    path.write_text(f"{good}\n{line}\n")
    with pytest.raises(WorkloadError, match=rf"reqs\.jsonl:2.*{says}"):
        build_workload(ServeOptions(requests_file=path), 2)


def test_input_len_makes_a_prompt_of_that_many_text_tokens() -> None:
    from kimi_bench.serving.usage import count_text_tokens

    work = build_workload(ServeOptions(input_len=37, resolution=(16, 16)), 2)
    assert count_text_tokens([work.requests[0].prompt]) == 37
    assert not math.isnan(summarize(work)["width"]["median"])


def test_a_replayed_trace_sends_each_request_at_its_own_timestamp(tmp_path: Path) -> None:
    """A recorded trace whose lines are not in time order: request i of the replay is the
    line with the i-th timestamp, so each prompt goes out at its own time."""
    stamps = {"late": 9.0, "first": 4.0, "middle": 6.5, "also-late": 9.0}
    path = tmp_path / "reqs.jsonl"
    path.write_text("\n".join(_line({"type": "text", "text": t}, timestamp=s)
                              for t, s in stamps.items()) + "\n")  # fmt: skip
    work = build_workload(ServeOptions(requests_file=path, replay_timestamps=True), 4)
    got = dict(zip((r.prompt for r in work.requests), work.timestamps or (), strict=True))
    assert got == {t: s - 4.0 for t, s in stamps.items()}
    assert [r.prompt for r in work.requests] == ["first", "middle", "late", "also-late"]
    in_file_order = build_workload(ServeOptions(requests_file=path), 4)  # at a rate
    assert [r.prompt for r in in_file_order.requests] == list(stamps)
    # serve-ab sends them at those offsets; the rate shown is the trace's mean (3 gaps, 5 s)
    from kimi_bench.bench.serve_http import HttpServeOptions, _offsets
    from kimi_bench.bench.serve_workload import prepare_workload, requests_from_file

    opts = ServeOptions(requests_file=path, replay_timestamps=True,
                        endpoints=("a=http://127.0.0.1:1",))  # fmt: skip
    fitted, work = prepare_workload(requests_from_file(opts))
    assert fitted.requests == 4 and fitted.rates == pytest.approx((3 / 5,))
    http = HttpServeOptions.from_options(fitted, None, None, work)
    assert _offsets(http, fitted.rates[0], 0) == (0.0, 2.5, 5.0, 5.0)
    assert [http.workload.requests[i].prompt for i in (0, 3)] == ["first", "also-late"]


def test_a_jsonl_line_naming_a_file_that_is_not_an_image_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a photo")
    path = tmp_path / "reqs.jsonl"
    path.write_text(_line({"type": "text", "text": "hi"}, _url("notes.txt")) + "\n")
    with pytest.raises(WorkloadError, match=r"reqs\.jsonl:1 image 0 .*notes\.txt.*not an image"):
        build_workload(ServeOptions(requests_file=path), 1)
