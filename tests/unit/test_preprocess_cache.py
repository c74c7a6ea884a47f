"""sglang 0.5.23's preprocess cache (``pipeline/preprocess_cache.py``, ``cache_steps.py``):
a repeated image skips decode, staging, preprocessing, the feature hash and the producer
copy; its stored CPU feature still goes into a fresh shm segment; none of it under the PR
profile or with the cache off. Repeats are seeded (``domain/repeats.py``)."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.ledger import hash_and_cache
from kimi_bench.domain.repeats import repeat_sources, with_repeats
from kimi_bench.domain.runtime import get_profile
from kimi_bench.pipeline import make_step, producer_step
from kimi_bench.pipeline.preprocess_cache import PreprocessCache
from kimi_bench.pipeline.transport import cleanup_segments

K3 = get_preset("kimi-k3")
CPU = torch.device("cpu")
PREFIX = "kbtest-pcache-"


def jpeg(seed: int, size: tuple[int, int] = (64, 48)) -> bytes:
    g = torch.Generator().manual_seed(seed)
    arr = torch.randint(0, 256, (size[1], size[0], 3), generator=g, dtype=torch.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr.numpy()).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def request(share: float) -> list[EncodedImage]:
    return with_repeats([EncodedImage(jpeg(s)) for s in range(4)], share, seed=7)


def ops(step, op: str, stage: str | None = None) -> tuple[int, int]:
    rows = [r for r in step.ledger.rows() if r["op"] == op and stage in (None, r["stage"])]
    return sum(r["bytes"] for r in rows), sum(r["count"] for r in rows)


def test_repeats_are_seeded_and_point_at_earlier_originals() -> None:
    src = repeat_sources(10, 0.5, seed=3)
    assert src == repeat_sources(10, 0.5, seed=3)
    assert sum(1 for i, s in enumerate(src) if s != i) == 5
    assert all(s < i and src[s] == s for i, s in enumerate(src) if s != i)
    assert repeat_sources(4, 0.0, 1) == [0, 1, 2, 3] and repeat_sources(1, 1.0, 1) == [0]
    with pytest.raises(ValueError):
        repeat_sources(4, 1.5, 0)


@pytest.mark.parametrize("arm", ["eager", "deferred"])
def test_half_repeated_images_hit_and_skip_their_work_under_0_5_23(arm: str) -> None:
    images = request(0.5)
    step = make_step(arm, K3, CPU, carrier_="shm", runtime="sglang-0.5.23")
    try:
        produced = producer_step(step, images, PREFIX)
    finally:
        cleanup_segments(PREFIX)
    c = hash_and_cache(step.ledger.rows(), cache_on=True)
    assert (c["cache_hits"], c["cache_misses"]) == (2, 2)
    assert ops(step, "decode")[1] == 2  # only the misses decode
    assert ops(step, "convert")[1] == 2  # ... and stage
    assert c["feature_hashes"] == 2  # ... and are hashed
    assert ops(step, "sha256", "producer")[1] == 4  # every image's content digest
    assert ops(step, "shm_copy_in")[1] == 4  # every item still copied into its own segment
    assert ops(step, "shm_fallocate") == ops(step, "shm_copy_in")  # each reserved first
    feats = [it.feature for it in produced.items]
    src = repeat_sources(4, 0.5, seed=7)
    assert all(feats[i] is feats[s] for i, s in enumerate(src))  # the shared CPU feature
    assert ops(step, "cache_hit")[0] == sum(
        feats[i].numel() * feats[i].element_size() for i, s in enumerate(src) if s != i
    )


def test_a_later_request_hits_the_stored_feature() -> None:
    datas = [jpeg(s) for s in range(3)]
    step = make_step("deferred", K3, CPU, runtime="sglang-0.5.23")
    first = producer_step(step, [EncodedImage(d) for d in datas], "")
    n_rows = {r["op"]: r["count"] for r in step.ledger.rows()}
    again = producer_step(step, [EncodedImage(d) for d in datas], "")
    assert step.cache is not None and (step.cache.hits, step.cache.misses) == (3, 3)
    assert [it.feature for it in again.items] == [it.feature for it in first.items]
    after = {r["op"]: r["count"] for r in step.ledger.rows()}
    assert after["decode"] == n_rows["decode"] == 3  # the second request decoded nothing
    assert after["sha256"] == 2 * n_rows["sha256"] - 3  # its digests only, no feature hash


@pytest.mark.parametrize("runtime", ["pr-33921", "sglang-0.5.23+cache-off"])
def test_no_hits_without_the_cache(runtime: str) -> None:
    step = make_step("deferred", K3, CPU, runtime=runtime)
    producer_step(step, request(0.5), "")
    assert step.cache is None
    assert ops(step, "cache_hit") == (0, 0) and ops(step, "decode")[1] == 4
    c = hash_and_cache(step.ledger.rows(), cache_on=get_profile(runtime).preprocess_cache)
    assert c["cache_hits"] is None and c["cache_misses"] is None
    # the PR era has no image identity; 0.5.23 without its cache keeps the content digest
    assert c["digest_bytes"] == (
        0 if runtime == "pr-33921" else sum(len(e.data) for e in request(0.5))
    )


def test_the_cache_is_bounded_least_recently_used_first_out() -> None:
    from kimi_bench.domain.contract import MMItem
    from kimi_bench.domain.policy import Decision

    cache = PreprocessCache(max_bytes=250, max_entries=2)
    put = lambda key, n: cache.put(  # noqa: E731
        key, MMItem(torch.zeros(n, dtype=torch.uint8), {}), Decision(True, "", n, 0), (1, 1)
    )
    assert put(b"a", 100) and put(b"b", 100)
    assert cache.get(b"a") is not None  # a is now the most recent
    assert put(b"c", 100)  # evicts b (bytes and entries bound)
    assert cache.get(b"b") is None and cache.get(b"a") is not None
    assert not put(b"d", 300)  # larger than the budget: not kept
    assert (cache.hits, cache.misses, cache.size) == (2, 1, 200)


def test_the_budget_is_split_across_tokenizer_workers() -> None:
    p = get_profile("sglang-0.5.23")
    assert p.cache_bytes(1) == 256 * 1024 * 1024 and p.cache_bytes(4) == 64 * 1024 * 1024
    assert get_profile("pr-33921").cache_bytes() == 0
    assert get_profile("sglang-0.5.23+cache-off").decision_scope == "request"


def test_palette_images_with_the_same_indices_do_not_share_a_key() -> None:
    """Two palette PNGs with the same index bytes, one with a transparency entry, stage
    differently (RGBA vs RGB under K3): their keys differ (parity once reported the opaque
    one as differing in the deferred-decode arm after it hit the other's entry)."""
    import numpy as np
    from PIL import Image

    from kimi_bench.pipeline.preprocess_cache import content_digest

    idx = np.arange(64, dtype=np.uint8).reshape(8, 8) % 16
    a = Image.fromarray(idx, "P")
    a.putpalette([i % 256 for i in range(48)])
    b = a.copy()
    b.info["transparency"] = 5
    c = a.copy()
    c.putpalette([255 - i % 256 for i in range(48)])
    keys = {content_digest(im)[0] for im in (a, b, c)}  # type: ignore[index]
    assert len(keys) == 3
    tall = Image.fromarray(idx.reshape(4, 16), "P")
    tall.putpalette([i % 256 for i in range(48)])
    assert content_digest(tall)[0] != content_digest(a)[0]  # type: ignore[index]


def palette_png(palette: list[int]) -> bytes:
    """A 32x24 palette PNG whose index bytes are the same whatever ``palette`` is."""
    idx = (torch.arange(32 * 24, dtype=torch.uint8).reshape(24, 32) % 16).numpy()
    im = Image.fromarray(idx, "P")
    im.putpalette(palette)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize("cache_on", [False, True])
def test_parity_palette_pngs_with_the_cache_off_and_on(tmp_path, monkeypatch, cache_on) -> None:
    """Two palette PNGs with the same indices and different palettes through every parity
    arm: with ``--no-preprocess-cache`` no producer has a cache and nothing is looked up
    (parity once ran its arms with the cache on whatever the flag said); with the cache on
    each producer looks both up under different keys, and neither hits. Either way each
    arm's output is that image's own, from a fresh eager run of it alone."""
    from kimi_bench.bench.parity import run_parity
    from kimi_bench.domain.navit import plan_resize
    from kimi_bench.options import ParityOptions
    from kimi_bench.pipeline import run_arm

    pngs = {"a.png": palette_png([i % 256 for i in range(48)]),
            "b.png": palette_png([255 - 5 * i % 256 for i in range(48)])}  # fmt: skip
    images = tmp_path / "in"
    images.mkdir()
    for name, data in pngs.items():
        (images / name).write_bytes(data)
    made: list[PreprocessCache] = []
    looked: list[tuple[int, bytes]] = []
    init, get = PreprocessCache.__init__, PreprocessCache.get

    def spy_init(self, *a, **k):  # type: ignore[no-untyped-def]
        init(self, *a, **k)
        made.append(self)

    def spy_get(self, key):  # type: ignore[no-untyped-def]
        looked.append((id(self), key))
        return get(self, key)

    monkeypatch.setattr(PreprocessCache, "__init__", spy_init)
    monkeypatch.setattr(PreprocessCache, "get", spy_get)
    opts = ParityOptions(images=images, device="cpu", runtime="sglang-0.5.23",
                         preprocess_cache=cache_on, dump=tmp_path / "dump")  # fmt: skip
    report = run_parity(opts)
    if cache_on:
        assert made and looked
        for cache in made:  # both images looked up, under two keys, no hit
            keys = [k for c, k in looked if c == id(cache)]
            assert len(keys) in (0, 2) and len(set(keys)) == len(keys)
            assert cache.hits == 0
        assert any(len([k for c, k in looked if c == id(x)]) == 2 for x in made)
    else:
        assert made == [] and looked == []  # no cache, no lookup, in any arm or rank
        assert report.config["runtime_profile"]["preprocess_cache"] == "off"
        assert report.config["decision_scope"] == "request"
    rows = {r["name"]: r for r in report.results}
    assert set(rows) == set(pngs) and all(r.get("error") is None for r in rows.values())
    for r in rows.values():
        assert r["bit_exact_fp32"] and r["bit_exact_bf16"]
        assert r["decode_bit_exact_fp32"] and r["decode_bit_exact_bf16"]
    monkeypatch.undo()  # the reference below runs without spies
    own = {}
    for name, data in pngs.items():
        im = Image.open(io.BytesIO(data))
        im.load()
        plan = plan_resize(im.width, im.height, K3)
        own[name] = run_arm("eager", [im], [plan], K3, 1, CPU, CPU, runtime="pr-33921").fp32[0]
        dumped = torch.load(tmp_path / "dump" / f"{name}.pt")
        assert torch.equal(dumped["eager"], own[name])
        assert torch.equal(dumped["deferred"], own[name])
    assert not torch.equal(own["a.png"], own["b.png"])  # the palettes do tell them apart
