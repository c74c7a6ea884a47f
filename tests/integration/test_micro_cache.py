"""micro with half of the request's images repeated: sglang-0.5.23 (its preprocess cache
on) shows the hits, the stages they skip and the bytes that change; pr-33921 shows none
(``pipeline/preprocess_cache.py``)."""

from __future__ import annotations

import pytest

from kimi_bench.bench.micro import run_micro
from kimi_bench.options import MicroOptions


def _run(runtime: str, share: float):
    return run_micro(
        MicroOptions(synthetic="4x64x48", ranks=2, repeats=1, warmup=0, control_repeats=0,
                     device="cpu", transport="shm", runtime=runtime, repeat_share=share)
    )  # fmt: skip


@pytest.mark.slow
def test_repeats_hit_the_0_5_23_cache_and_not_the_pr_era() -> None:
    new, pr, cold = _run("sglang-0.5.23", 0.5), _run("pr-33921", 0.5), _run("sglang-0.5.23", 0.0)
    got, none, fresh = (r.summary["hash_and_cache"] for r in (new, pr, cold))
    for arm in ("eager", "deferred"):
        assert (got[arm]["cache_hits"], got[arm]["cache_misses"]) == (2, 2)
        assert (fresh[arm]["cache_hits"], fresh[arm]["cache_misses"]) == (0, 4)
        assert none[arm]["cache_hits"] is None and none[arm]["feature_hashes"] == 4
        assert got[arm]["feature_hashes"] == 2 and fresh[arm]["feature_hashes"] == 4
    stages = lambda r, arm: r.data["arms"][arm]["stages"]  # noqa: E731
    # eager: half the device concat before the hash, half the FP32 D2H; the shm copy-in
    # (a fresh segment per item) unchanged
    for s in ("hash", "d2h"):
        assert 2 * stages(new, "eager")[s]["bytes"] == stages(cold, "eager")[s]["bytes"] > 0
    shm = lambda r: [(c["bytes"], c["count"]) for c in r.data["arms"]["eager"]["copies"]  # noqa: E731
                     if c["op"] == "shm_copy_in"]  # fmt: skip
    assert shm(new) == shm(cold) and shm(new)[0][1] == 4
    assert stages(pr, "deferred")["hash"]["bytes"] == 4 * 3 * 64 * 48  # the flatten copies
    assert any("2 hits, 2 misses" in n for n in new.notes)
