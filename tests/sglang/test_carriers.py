"""``micro --carrier sglang-shm|sglang-pickle``: the runtime's own carrier functions move the
features, and their copy ledger equals kimi-bench's own carrier's (same ops, places,
counts and pixel bytes per stage) on the same input and runtime profile."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from kimi_bench.bench.micro import MicroFailed, run_micro
from kimi_bench.cli.main import app
from kimi_bench.domain.config import get_preset
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import plan_resize
from kimi_bench.engine.images import make_images
from kimi_bench.options import MicroOptions
from kimi_bench.pipeline import (
    Step,
    carrier,
    decide,
    deserialize,
    make_step,
    produce,
    serialize,
    take,
)
from kimi_bench.pipeline.transport import cleanup_segments, list_segments, new_prefix
from kimi_bench.sglang_ref import Runtime, SglangMissingError
from kimi_bench.sglang_ref import carriers as C
from tests.faults import CrashAtRepeat, spec

pytestmark = pytest.mark.sglang

K3 = get_preset("kimi-k3")
CPU = torch.device("cpu")
SPEC = "2x64x48"
# ops that move a pickled blob: their size includes the object around the features (the
# runtime's TokenizedGenerateReqInput vs kimi-bench's item list), a few KiB at most
BLOB_OPS = {"pickle", "ipc", "unpickle", "gloo_broadcast", "bytes_copy"}
FRAMING = 4096


def _by_place(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], tuple[int, int]]:
    out: dict[tuple[str, str, str, str], tuple[int, int]] = {}
    for r in rows:
        key = (r["stage"], r["op"], r["src"], r["dst"])
        b, c = out.get(key, (0, 0))
        out[key] = (b + r["bytes"], c + r["count"])
    return out


def ledger_differences(own: list[dict[str, Any]], runtime: list[dict[str, Any]]) -> list[str]:
    """What differs, per (stage, op, src, dst): presence, count, bytes (blob ops: beyond
    the framing allowance per operation)."""
    a, b = _by_place(own), _by_place(runtime)
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            out.append(f"{key}: only in the {'runtime' if key in b else 'own'} carrier's ledger")
            continue
        (ab, ac), (bb, bc) = a[key], b[key]
        if ac != bc:
            out.append(f"{key}: {ac} operation(s) (own) vs {bc} (runtime)")
        allowed = FRAMING * ac if key[1] in BLOB_OPS else 0
        if abs(ab - bb) > allowed:
            out.append(f"{key}: {ab} bytes (own) vs {bb} (runtime)")
    return out


# ------------------------------------------------------------------------ in one process


@pytest.fixture
def shm_runtime(rt: Runtime) -> Iterator[Runtime]:
    C.configure("sglang-shm")
    yield rt
    C.release()


def _items(runtime: str) -> tuple[list[Any], Step]:
    images = make_images(((2, 64, 48),), "random", 0)
    plans = [plan_resize(im.width, im.height, K3) for im in images]
    step = make_step("deferred", K3, CPU, runtime=runtime, ledger=Ledger())
    return produce(step, images, plans, decide(step, images, plans)), step


@pytest.mark.parametrize("runtime", ["sglang-0.5.23", "pr-33921"])
def test_wrap_and_take_copy_as_the_own_shm_carrier(shm_runtime: Runtime, runtime: str):
    """pr-33921's producer keeps permuted views: ShmPointerMMData's .contiguous() shows."""
    items, _ = _items(runtime)
    own = make_step("deferred", K3, CPU, runtime=runtime, ledger=Ledger())
    ref = make_step("deferred", K3, CPU, runtime=runtime, ledger=Ledger())
    prefix, mine = new_prefix(), f"{C.SEGMENT_PREFIX}{os.getpid()}_"
    try:
        blob = serialize(own, carrier("shm").wrap(own, items, prefix), "serialize", "send_pyobj")
        own_items, _ = take(own, deserialize(own, blob, "to_rank0", "recv_pyobj"))
        packed = C.wrap(ref, items, "sglang-shm", "")
        assert len(list_segments(mine)) == len(items)  # the runtime's own segment names
        blob = serialize(ref, packed, "serialize", "send_pyobj")
        assert len(blob) < 8192  # names, shapes and dtypes only
        ref_items, names = C.take(ref, deserialize(ref, blob, "to_rank0", "recv_pyobj"))
        assert names and all(n.startswith(mine) for n in names)
        assert list_segments(mine) == []  # materialize unlinked every segment
    finally:
        cleanup_segments(prefix)
        cleanup_segments(mine)
    for got, want, src in zip(ref_items, own_items, items, strict=True):
        assert got.feature.dtype == torch.uint8
        assert torch.equal(got.feature, want.feature)  # uint8
        assert torch.equal(got.feature, src.feature.contiguous())
    stages = ("serialize",) if runtime == "pr-33921" else ("serialize", "take_copy")
    pick = [[r for r in s.ledger.rows() if r["stage"] in stages] for s in (own, ref)]
    assert ledger_differences(*pick) == []
    hwc = [r for r in ref.ledger.rows() if r["op"] == "hwc_to_chw"]
    assert bool(hwc) == (runtime == "pr-33921")
    takes = [r for r in ref.ledger.rows() if r["stage"] == "take_copy"]
    assert [(r["op"], r["count"]) for r in takes] == [("map", 2)]
    assert "ACCESS_COPY map" in takes[0]["mirrors"] and "not verified" not in takes[0]["mirrors"]
    assert all(r["mirrors"].startswith(C.TAG) for r in hwc + takes)


def test_receiver_copy_tells_a_mapping_from_a_clone(tmp_path: Path):
    import mmap

    path = tmp_path / "segment"
    path.write_bytes(bytes(range(256)) * 64)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    t = torch.frombuffer(mapped, dtype=torch.uint8)
    assert C.receiver_copy(t, "segment", t.numel()) == ("map", True)
    assert C.receiver_copy(t, "another", t.numel()) == ("clone", True)
    assert C.receiver_copy(t.clone(), "segment", t.numel()) == ("clone", True)


def test_runtime_segments_are_removed_per_process_only():
    """The clean-up after a failed run: only the named processes' runtime segments."""
    pid = os.getpid()
    ours = f"{C.SEGMENT_PREFIX}{pid}_0badc0de"
    other = f"{C.SEGMENT_PREFIX}{pid}1_0badc0de"  # another pid sharing the digits
    for name in (ours, other):
        os.close(os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
    try:
        assert C.cleanup_runtime_segments([pid]) == [ours]
        assert list_segments(other) == [other]
    finally:
        cleanup_segments(ours)
        cleanup_segments(other)


def test_segment_prefix_is_the_runtimes(rt: Runtime):
    assert rt.sym("make_shm_name")("mm").startswith(f"{C.SEGMENT_PREFIX}{os.getpid()}_")


# ---------------------------------------------------------------------- the command line


def test_carrier_flag_without_sglang_exits_2_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a, **k: None if n == "sglang" else real(n, *a)
    )
    with pytest.raises(SglangMissingError):
        C.require_installed("sglang-shm")
    res = CliRunner().invoke(
        app, ["micro", "--carrier", "sglang-shm", "--device", "cpu", "--out", str(tmp_path / "m")]
    )
    assert res.exit_code == 2, res.output
    assert "sglang-env.sh" in res.output and "requirements-sglang.txt" in res.output


def test_runtime_carrier_needs_the_release_profile(tmp_path: Path):
    res = CliRunner().invoke(
        app,
        ["micro", "--carrier", "sglang-pickle", "--runtime", "pr-33921", "--out", str(tmp_path)],
    )
    assert res.exit_code == 2
    assert "sglang-0.5.23" in res.output


def test_runtime_carrier_refuses_the_proposed_zero_copy_arm(tmp_path: Path):
    res = CliRunner().invoke(
        app,
        ["micro", "--carrier", "sglang-shm", "--arms", "eager,deferred,zero-copy",
         "--out", str(tmp_path)],
    )  # fmt: skip
    assert res.exit_code == 2
    assert "zero-copy arm runs with --carrier shm or pickle" in res.output


def test_unknown_transport_is_refused():
    with pytest.raises(ValueError, match="sglang-shm"):
        carrier("sglang-ipc")


# --------------------------------------------------------------------- micro, real ranks


def _micro(transport: str, **kw: Any) -> Any:
    opts = MicroOptions(
        synthetic=SPEC, ranks=2, repeats=1, warmup=0, device="cpu", transport=transport, **kw
    )
    return run_micro(opts)


def _assert_no_segments(report: Any) -> None:
    prefixes = [report.data["shm_prefix"], *report.data.get("runtime_shm_prefixes", [])]
    assert len(prefixes) >= (4 if report.summary["transport"].startswith("sglang-") else 1)
    for prefix in prefixes:
        assert list_segments(prefix) == [], prefix


@pytest.fixture(scope="module")
def runs(rt: Runtime) -> dict[str, Any]:
    """One micro run per carrier on the same input (2 ranks, both arms, CPU)."""
    return {t: _micro(t) for t in ("shm", "sglang-shm", "pickle", "sglang-pickle")}


@pytest.mark.slow
@pytest.mark.parametrize("own", ["shm", "pickle"])
def test_runtime_carrier_ledger_equals_the_own_carrier(runs: dict[str, Any], own: str):
    mine, theirs = runs[own], runs[f"sglang-{own}"]
    assert theirs.summary["transport"] == f"sglang-{own}"
    assert theirs.config["transport"] == f"sglang-{own}"
    assert any("broadcast_pyobj" in n and "wrap_shm_features" in n for n in theirs.notes)
    raw = 2 * 64 * 48 * 3
    for arm in ("eager", "deferred"):
        a, b = mine.data["arms"][arm]["copies"], theirs.data["arms"][arm]["copies"]
        assert ledger_differences(a, b) == [], arm
        assert not any(r["mirrors"].startswith(C.TAG) for r in a)
        carried = [
            r for r in b
            if r["stage"] in ("broadcast", "take_copy") or r["op"] == "shm_copy_in"
        ]  # fmt: skip
        assert carried and all(r["mirrors"].startswith(C.TAG) for r in carried), arm
        blobs = [r["bytes"] // r["count"] for r in a + b if r["op"] == "pickle"]
        if own == "shm":
            assert max(blobs) < 8192  # metadata only: the pixels went through /dev/shm
        else:
            assert min(blobs) >= raw  # the pixels travel inline in every pickle
    assert theirs.summary["bit_exact_all_repeats"] is True
    _assert_no_segments(theirs)
    _assert_no_segments(mine)


@pytest.mark.slow
def test_failed_run_leaves_no_runtime_segment(rt: Runtime):
    with pytest.raises(MicroFailed) as info:
        _micro("sglang-shm", fault_hooks=spec(CrashAtRepeat, repeat=0))
    report = info.value.report
    assert "injected fault" in (report.summary["error"] or "")
    _assert_no_segments(report)


def test_ledger_differences_names_what_differs():
    row = {"stage": "take_copy", "op": "map", "src": "shm", "dst": "host", "count": 2}
    blob = {"stage": "broadcast", "op": "pickle", "src": "host", "dst": "host", "count": 1}
    own = [row | {"bytes": 100}, blob | {"bytes": 500}]
    assert ledger_differences(own, [row | {"bytes": 100}, blob | {"bytes": 2500}]) == []
    assert ledger_differences(own, [row | {"bytes": 101}, blob | {"bytes": 500}]) == [
        "('take_copy', 'map', 'shm', 'host'): 100 bytes (own) vs 101 (runtime)"
    ]
    assert ledger_differences(own, [row | {"bytes": 100, "count": 1}, blob | {"bytes": 9000}])
    assert "only in the own" in ledger_differences(own, own[1:])[0]
