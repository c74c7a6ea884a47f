"""The built-in corpus under both presets, held against the installed runtime: resize
plans, deferral decisions, eager and deferred features (FP32 and BF16, torch.equal)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock  # a dependency of torch

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.corpus import builtin_corpus
from kimi_bench.sglang_ref import Runtime, first_difference, reference_rows
from kimi_bench.sglang_ref.features import CHECKS

pytestmark = [pytest.mark.sglang, pytest.mark.slow]

PRESETS = ("kimi-k3", "kimi-k2.5")

# Inputs that sglang 0.5.23 refuses where kimi-bench produces features: the exception the
# runtime raises and the steps that raise it. Everything else about these inputs must
# still agree (plan; deferred features where the input is deferrable).
# - A 2-D tensor: the runtime's _get_image_dimensions reads shape[2] (IndexError) in both
#   the decision and the eager producer; kimi-bench reads it as one channel (SPEC 4).
# - A float32 tensor under K2.5: the K2.5 GPU producer (_ensure_chw_rgb) refuses non-uint8
#   pixels; kimi-bench's eager arm casts it (the K3 producer also accepts it).
RUNTIME_REFUSES: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("kimi-k3", "tensor_2d_90x60"): ("IndexError", ("decision", "eager")),
    ("kimi-k2.5", "tensor_2d_90x60"): ("IndexError", ("decision", "eager")),
    ("kimi-k2.5", "tensor_float32_64x48"): ("ValueError", ("eager",)),
}

_ROWS: dict[str, list[dict[str, Any]]] = {}
_SHARED: list[Path] = []  # the folder every worker of this pytest run reads the rows from


@pytest.fixture(scope="session", autouse=True)
def _shared_rows_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The rows of a preset are made once per pytest run, not once per xdist worker (the
    environment's pytest ignores ``xdist_group``): the first worker to ask writes them
    under the run's common temp folder, the others read them."""
    base = tmp_path_factory.getbasetemp()
    _SHARED.append(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


def _rows(rt: Runtime, preset: str) -> dict[str, dict[str, Any]]:
    if preset not in _ROWS:
        path = _SHARED[0] / f"sglang-corpus-rows-{preset}.pickle"
        with FileLock(f"{path}.lock"):
            if path.is_file():
                _ROWS[preset] = pickle.loads(path.read_bytes())
            else:
                cfg = get_preset(preset)
                _ROWS[preset] = reference_rows(builtin_corpus(cfg), cfg, "cpu", runtime=rt)
                path.write_bytes(pickle.dumps(_ROWS[preset]))
    return {row["name"]: row for row in _ROWS[preset]}


def _cases(refused: bool) -> list[Any]:
    out = []
    for preset in PRESETS:
        for entry in builtin_corpus(get_preset(preset)):
            if ((preset, entry.name) in RUNTIME_REFUSES) == refused:
                out.append(pytest.param(preset, entry.name, id=f"{preset}-{entry.name}"))
    return out


@pytest.mark.parametrize(("preset", "name"), _cases(refused=False))
def test_input_identical_to_runtime(rt: Runtime, preset: str, name: str) -> None:
    row = _rows(rt, preset)[name]
    assert row["reference_identical"], first_difference([row])
    assert row["reference_plan_equal"] is True
    assert row["reference_decision_equal"] is True
    assert row["reference_eager_fp32_equal"] is True
    assert row["reference_eager_bf16_equal"] is True
    assert row["reference_resize_config"] == row["resize_config"]
    assert row["reference_defer"] == row["deferred"]


@pytest.mark.parametrize(("preset", "name"), _cases(refused=True))
def test_input_the_runtime_refuses(rt: Runtime, preset: str, name: str) -> None:
    row = _rows(rt, preset)[name]
    exc_type, steps = RUNTIME_REFUSES[(preset, name)]
    errors = (row["reference_error"] or "").split("; ")
    assert [e.split(":")[0] for e in errors] == list(steps), row["reference_detail"]
    assert all(f"sglang raised {exc_type}" in e for e in errors), row["reference_detail"]
    assert row["reference_plan_equal"] is True
    others = [k for k in CHECKS if not any(s.split()[0] in k for s in steps)]
    assert all(row[k] in (True, None) for k in others), row


@pytest.mark.parametrize("preset", PRESETS)
def test_every_deferrable_input_materializes_identically(rt: Runtime, preset: str) -> None:
    """Deferred materialization (the K3 model's consumer driven by kimi-bench's record)
    covers every PIL image and uint8 tensor of the corpus, FP32 and BF16."""
    rows = _rows(rt, preset).values()
    deferrable = [r for r in rows if r["reference_deferred_fp32_equal"] is not None]
    assert len(deferrable) == len(rows) - 1  # all but the float32 tensor
    assert all(r["reference_deferred_fp32_equal"] for r in deferrable)
    assert all(r["reference_deferred_bf16_equal"] for r in deferrable)


def test_k3_staging_matches_the_runtime_producer(rt: Runtime) -> None:
    rows = list(_rows(rt, "kimi-k3").values())
    staged = [r for r in rows if r["reference_staged_equal"] is not None]
    assert staged and all(r["reference_staged_equal"] for r in staged)
    # K2.5 has no deferral path in the runtime: nothing to hold its staging against
    assert rt.model_defers["KimiK25ForConditionalGeneration"] is False
    assert all(r["reference_staged_equal"] is None for r in _rows(rt, "kimi-k2.5").values())


def test_corpus_covers_both_decisions(rt: Runtime) -> None:
    for preset in PRESETS:
        verdicts = {r["reference_defer"] for r in _rows(rt, preset).values()}
        assert verdicts >= {True, False}, preset


@pytest.mark.gpu
@pytest.mark.parametrize("preset", PRESETS)
def test_corpus_identical_to_runtime_on_cuda(rt: Runtime, preset: str) -> None:
    """On a GPU host both sides run on CUDA: the runtime's eager producer and its Triton
    normalize/patchify kernel, its K3 consumer, against kimi-bench's materializer."""
    cfg = get_preset(preset)
    entries = [e for e in builtin_corpus(cfg) if (preset, e.name) not in RUNTIME_REFUSES]
    rows = reference_rows(entries, cfg, "cuda", runtime=rt)
    assert first_difference(rows) is None


def test_the_runtimes_load_image_decodes_as_kimi_bench_does(rt: Runtime) -> None:
    """Every built-in input that has encoded bytes (the image files and photos): the
    runtime's own load_image, with K3's gpu_image_decode, gives the pixels kimi-bench's
    decoder gives on this device (PIL without CUDA, as the runtime's rule says)."""
    rows = _rows(rt, "kimi-k3")
    encoded = {e.name for e in builtin_corpus(get_preset("kimi-k3")) if e.encoded is not None}
    assert encoded, "the built-in corpus has encoded inputs (the photos)"
    assert {n for n, r in rows.items() if r["reference_decode_equal"] is True} == encoded
    assert all(r["reference_decode_equal"] is None for n, r in rows.items() if n not in encoded)
