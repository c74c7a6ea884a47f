"""Per-input comparison of kimi-bench with the runtime: resize plan, deferral decision,
eager features and deferred materialization (FP32 and BF16, ``torch.equal``).

Every row carries the kimi-bench values it was built from and ``reference_*`` columns:

- ``reference_resize_config`` / ``reference_plan_equal``: ``navit_resize_config`` vs
  ``kimi_bench.domain.navit.plan_resize``;
- ``reference_defer`` / ``reference_decision_equal``: the K3 processor's
  ``_should_defer_gpu_preprocessing`` vs ``kimi_bench.domain.policy.decide_images``;
- ``reference_eager_fp32_equal`` / ``..._bf16_equal``: the model's GPU processor wrapper
  (``_gpu_call``) and the model's tower buffer vs ``kimi_bench.domain.materialize.materialize``
  and ``to_tower_buffer``;
- ``reference_deferred_fp32_equal`` / ``..._bf16_equal``: ``get_image_feature`` of the K3
  model driven by kimi-bench's deferred record vs ``materialize_items`` (None when the
  input is not deferrable: only PIL images and uint8 tensors are);
- ``reference_staged_equal``: the runtime's producer staging (``to_chw_uint8``) vs
  kimi-bench's uint8 CHW staging (None for a model without a deferral path);
- ``reference_error``: what the runtime (or kimi-bench) raised, per step;
- ``reference_identical`` and ``reference_detail``: the verdict and what differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import kimi_bench.sglang_ref.calls as C
import kimi_bench.sglang_ref.runtime as R
from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.contract import (
    DEFERRED_KEY,
    GRID_KEY,
    MMItem,
    grid_tensor,
    make_deferred_record,
)
from kimi_bench.domain.corpus import CorpusEntry, describe_input
from kimi_bench.domain.decoders import DeviceImage, choose
from kimi_bench.domain.materialize import materialize, materialize_items, to_tower_buffer
from kimi_bench.domain.navit import ResizePlan, plan_resize
from kimi_bench.domain.pixels import input_size, stage_input
from kimi_bench.domain.policy import PolicyMode, decide_images, is_deferrable_input
from kimi_bench.domain.runtime import get_profile
from kimi_bench.domain.scheduler import PRESET_MODEL_CLASS

CHECKS = (
    "reference_plan_equal",
    "reference_decision_equal",
    "reference_eager_fp32_equal",
    "reference_eager_bf16_equal",
    "reference_deferred_fp32_equal",
    "reference_deferred_bf16_equal",
    "reference_staged_equal",
    "reference_decode_equal",  # encoded inputs: the runtime's load_image vs kimi-bench's decoder
)
REFERENCE_KEYS = (
    "reference_resize_config",
    "reference_defer",
    *CHECKS,
    "reference_error",
    "reference_identical",
    "reference_detail",
)


@dataclass
class _Input:
    row: dict[str, Any]
    obj: Any = None
    plan: ResizePlan | None = None
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    encoded: Callable[[], bytes] | None = None  # the input's encoded bytes, if it has them

    @property
    def planned(self) -> ResizePlan:
        if self.plan is None:
            raise ValueError(f"{self.row['name']} has no resize plan")
        return self.plan


def _plans(inputs: Sequence[_Input]) -> list[ResizePlan]:
    return [i.planned for i in inputs]


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def tensor_difference(ours: torch.Tensor, theirs: torch.Tensor) -> str | None:
    """None when ``torch.equal``; otherwise what differs (shape, dtype or values)."""
    a, b = ours.detach().cpu(), theirs.detach().cpu()
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} vs {b.dtype}"
    if torch.equal(a, b):
        return None
    diff = (a.double() - b.double()).abs()
    n = int((a != b).sum())
    return f"{n} of {a.numel()} values differ, max |diff| {float(diff.max()):.6g}"


def _load(entry: CorpusEntry, cfg: PreprocessConfig) -> _Input:
    row: dict[str, Any] = {"name": entry.name, "source": entry.source, "mode": None}
    row.update(dict.fromkeys(REFERENCE_KEYS))
    inp = _Input(row, encoded=entry.encoded)
    try:
        inp.obj = entry.load()
        row["mode"] = describe_input(inp.obj)
        w, h = input_size(inp.obj)
        row["width"], row["height"] = w, h
        inp.plan = plan_resize(w, h, cfg)
    except Exception as exc:  # one unusable input is an error row, not an abort
        row["error"] = _err(exc)
    return inp


def _check(inp: _Input, key: str, what: str, diff: str | None) -> None:
    inp.row[key] = diff is None
    if diff is not None:
        inp.notes.append(f"{what}: {diff}")


def _compare_plans(rt: R.Runtime, inputs: list[_Input], cfg: PreprocessConfig) -> None:
    for inp in inputs:
        ours = inp.planned.resize_config()
        theirs = C.resize_config(rt, inp.planned.width, inp.planned.height, cfg)
        inp.row["resize_config"] = ours
        inp.row["reference_resize_config"] = theirs
        _check(
            inp, "reference_plan_equal", "plan", None if ours == theirs else f"{ours} vs {theirs}"
        )


def _compare_decisions(
    rt: R.Runtime,
    inputs: list[_Input],
    cfg: PreprocessConfig,
    policy: PolicyMode,
    per_request: int,
    transport: str,
    owner_can_materialize: bool,
) -> None:
    for start in range(0, len(inputs), per_request):
        req = inputs[start : start + per_request]
        objs = [i.obj for i in req]
        ours = decide_images(
            objs,
            _plans(req),
            policy,
            transport,
            owner_can_materialize,
        )
        groups = [objs] if policy == "request" else [[o] for o in objs]
        theirs: list[bool | str] = []
        for group in groups:
            try:
                verdict: bool | str = C.should_defer(
                    rt, group, cfg, transport, owner_can_materialize
                )
            except Exception as exc:
                verdict = _err(exc)
            theirs += [verdict] * len(group)
        for inp, d, t in zip(req, ours, theirs, strict=True):
            inp.row["deferred"], inp.row["reason"] = d.defer, d.reason
            if isinstance(t, str):
                inp.errors.append(f"decision: sglang raised {t}")
                inp.row["reference_decision_equal"] = False
                continue
            inp.row["reference_defer"] = t
            diff = None if d.defer == t else f"kimi-bench defer={d.defer} vs sglang defer={t}"
            _check(inp, "reference_decision_equal", "decision", diff)


def _pixels(image: Any) -> torch.Tensor:
    """RGB uint8 CHW on the host of a PIL image, a CUDA tensor or a ``DeviceImage``."""
    t = image.tensor if isinstance(image, DeviceImage) else image
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        return t.repeat(3, 1, 1) if t.dim() == 3 and t.shape[0] == 1 else t
    return torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1).contiguous()


def _compare_decode(rt: R.Runtime, inputs: list[_Input], dev: torch.device) -> None:
    """The runtime's own ``load_image`` (with K3's ``gpu_image_decode``) against the decoder
    kimi-bench picks on this device for every input that has encoded bytes."""
    flag = getattr(rt.sym("KimiK3ImageProcessor"), "gpu_image_decode", True)
    choice = choose("auto", get_profile(None), dev)
    for inp in inputs:
        if inp.encoded is None:
            continue
        data = inp.encoded()
        try:
            theirs, _ = rt.sym("load_image")(data, flag)
        except Exception as exc:
            inp.errors.append(f"decode: sglang raised {_err(exc)}")
            inp.row["reference_decode_equal"] = False
            continue
        ours = choice.decode(data, dev)
        diff = tensor_difference(_pixels(ours.image), _pixels(theirs))
        _check(inp, "reference_decode_equal", f"decode ({ours.decoder.name})", diff)


def _split(values: torch.Tensor, plans: Sequence[ResizePlan]) -> list[torch.Tensor]:
    return list(torch.split(values.detach().cpu(), [p.num_patches for p in plans]))


Pair = tuple[torch.Tensor, torch.Tensor]  # one input's FP32 features and BF16 buffer rows
Step = Callable[[list[_Input]], list[Pair]]


def _per_input(batch: list[_Input], step: Step) -> list[Pair | str]:
    """Run ``step`` on the batch; if it raises, run each input alone to find which one."""
    try:
        return list(step(batch))
    except Exception:
        out: list[Pair | str] = []
        for inp in batch:
            try:
                out.append(step([inp])[0])
            except Exception as exc:
                out.append(_err(exc))
        return out


def _compare_arm(batch: list[_Input], arm: str, ours: Step, theirs: Step) -> None:
    """Both sides of one arm over the batch; an exception is pinned to its input."""
    keys = (f"reference_{arm}_fp32_equal", f"reference_{arm}_bf16_equal")
    for inp, a, b in zip(batch, _per_input(batch, ours), _per_input(batch, theirs), strict=True):
        for side, got in (("kimi-bench", a), ("sglang", b)):
            if isinstance(got, str):
                inp.errors.append(f"{arm}: {side} raised {got}")
        if isinstance(a, str) or isinstance(b, str):
            inp.row[keys[0]] = inp.row[keys[1]] = False
            continue
        _check(inp, keys[0], f"{arm} FP32", tensor_difference(a[0], b[0]))
        _check(inp, keys[1], f"{arm} BF16", tensor_difference(a[1], b[1]))


def _pairs(fp32: torch.Tensor, bf16: torch.Tensor, plans: list[ResizePlan]) -> list[Pair]:
    return list(zip(_split(fp32, plans), _split(bf16, plans), strict=True))


def _compare_eager(
    rt: R.Runtime, batch: list[_Input], cfg: PreprocessConfig, model: str, dev: torch.device
) -> None:
    def ours(part: list[_Input]) -> list[Pair]:
        plans = _plans(part)
        chw = [stage_input(i.obj, cfg, require_uint8=False) for i in part]
        fp32 = materialize(chw, plans, cfg, dev).pixel_values
        return _pairs(fp32, to_tower_buffer(_split(fp32, plans), torch.bfloat16, dev), plans)

    def theirs(part: list[_Input]) -> list[Pair]:
        plans = _plans(part)
        fp32, grids = C.eager_features(rt, [i.obj for i in part], cfg, model, dev)
        feats = _split(fp32, plans)
        items = [(f, tuple(g), None) for f, g in zip(feats, grids.tolist(), strict=True)]
        return _pairs(fp32, C.model_features(rt, items, cfg.patch_size, torch.bfloat16, dev), plans)

    _compare_arm(batch, "eager", ours, theirs)


def _compare_deferred(
    rt: R.Runtime, batch: list[_Input], cfg: PreprocessConfig, model: str, dev: torch.device
) -> None:
    """Deferred materialization of every deferrable input (whatever the decision): the
    runtime stages it with its producer's ``to_chw_uint8`` and materializes it from
    kimi-bench's record in the K3 model's consumer."""
    ready = [i for i in batch if is_deferrable_input(i.obj)]
    if not ready:
        return
    if rt.model_defers.get(model, True):
        for inp in ready:
            try:
                ours_chw = stage_input(inp.obj, cfg, require_uint8=True)
                diff = tensor_difference(ours_chw, C.stage(rt, inp.obj))
                _check(inp, "reference_staged_equal", "staged uint8", diff)
            except Exception as exc:
                inp.errors.append(f"staging: {_err(exc)}")
                inp.row["reference_staged_equal"] = False

    def ours(part: list[_Input]) -> list[Pair]:
        plans = _plans(part)
        items = [
            MMItem(
                stage_input(i.obj, cfg, require_uint8=True),
                {GRID_KEY: grid_tensor(p), DEFERRED_KEY: make_deferred_record(p, cfg)},
            )
            for i, p in zip(part, plans, strict=True)
        ]
        fp32 = materialize_items(items, cfg, dev).pixel_values
        return _pairs(fp32, to_tower_buffer(_split(fp32, plans), torch.bfloat16, dev), plans)

    def theirs(part: list[_Input]) -> list[Pair]:
        plans = _plans(part)
        spec = [
            (C.stage(rt, i.obj), p.grid_thw, C.deferred_record(rt, make_deferred_record(p, cfg)))
            for i, p in zip(part, plans, strict=True)
        ]
        fp32 = C.model_features(rt, spec, cfg.patch_size, torch.float32, dev)
        bf16 = C.model_features(rt, spec, cfg.patch_size, torch.bfloat16, dev)
        return _pairs(fp32, bf16, plans)

    _compare_arm(ready, "deferred", ours, theirs)


def _verdict(inp: _Input) -> None:
    row = inp.row
    if row.get("error") is not None:
        row["reference_identical"] = False
        row["reference_detail"] = f"kimi-bench could not load the input: {row['error']}"
        return
    row["reference_error"] = "; ".join(inp.errors) or None
    row["reference_identical"] = not inp.errors and all(row[k] is not False for k in CHECKS)
    row["reference_detail"] = "; ".join(inp.errors + inp.notes) or None


def reference_rows(
    entries: Sequence[CorpusEntry],
    cfg: PreprocessConfig,
    device: torch.device | str = "cpu",
    *,
    policy: PolicyMode = "request",
    images_per_request: int = 1,
    transport: str = "cpu",
    owner_can_materialize: bool = True,
    batch_size: int = 4,
    runtime: R.Runtime | None = None,
) -> list[dict[str, Any]]:
    """One row per entry, in order: kimi-bench's values and the runtime's (see the module
    docstring for the columns). Inputs are materialized ``batch_size`` at a time on both
    sides (the runtime's grouping is exercised too); a runtime error is pinned to the
    input that raised it."""
    if batch_size < 1 or images_per_request < 1:
        raise ValueError("batch_size and images_per_request must be >= 1")
    rt = runtime if runtime is not None else R.load_runtime()
    dev = torch.device(device)
    model = PRESET_MODEL_CLASS.get(cfg.name, R.K3_CLASS)
    inputs = [_load(e, cfg) for e in entries]
    ok = [i for i in inputs if i.plan is not None]
    _compare_plans(rt, ok, cfg)
    _compare_decode(rt, ok, dev)
    _compare_decisions(rt, ok, cfg, policy, images_per_request, transport, owner_can_materialize)
    for start in range(0, len(ok), batch_size):
        batch = ok[start : start + batch_size]
        _compare_eager(rt, batch, cfg, model, dev)
        _compare_deferred(rt, batch, cfg, model, dev)
    for inp in inputs:
        _verdict(inp)
    return [i.row for i in inputs]


def first_difference(rows: Sequence[dict[str, Any]]) -> str | None:
    """The first input that is not identical to the runtime, and what differs."""
    for row in rows:
        if row.get("reference_identical") is False:
            return f"{row['name']}: {row.get('reference_detail') or 'differs'}"
    return None


def reference_metadata(rt: R.Runtime, cfg: PreprocessConfig) -> dict[str, Any]:
    """What a report should say about the reference it was held against."""
    model = PRESET_MODEL_CLASS.get(cfg.name, R.K3_CLASS)
    notes = []
    if not rt.model_defers.get(model, True):
        notes.append(
            f"sglang {rt.version}: {model}'s processor has no deferral path (every image "
            "is preprocessed eagerly); decisions are compared with KimiK3ImageProcessor's "
            "decision function and deferred features with the K3 model's consumer, both "
            "fed this preset's numbers"
        )
    return {
        "sglang_version": rt.version,
        "sglang_location": rt.location,
        "model_class": model,
        "model_defers": rt.model_defers.get(model, True),
        "notes": notes,
    }
