"""Calls into the installed runtime's own functions (see :mod:`.runtime` for how they
are found). Where a function reads its environment (is there a CUDA device? which transport
is configured?) or a heavy object (the HF processor, the vision tower), a small stand-in
supplies exactly the attributes it reads; each stand-in is named where it is built. On a
CPU-only host the runtime's eager producer ends in ``.cuda()``; :func:`_on_host` sends
those calls to the host instead (the only change to what runs).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.sglang_ref.runtime import K3, K25_CLASS, Runtime

# --- configuration -------------------------------------------------------------------------


def media_proc_cfg(cfg: PreprocessConfig) -> dict[str, Any]:
    """kimi-bench's config as the checkpoint's ``media_proc_cfg`` the runtime reads."""
    return {
        "patch_size": cfg.patch_size,
        "merge_kernel_size": cfg.merge_kernel_size,
        "in_patch_limit": cfg.in_patch_limit,
        "patch_limit_on_one_side": cfg.patch_limit_on_one_side,
        "fixed_output_tokens": cfg.fixed_output_tokens,
        "image_mean": list(cfg.image_mean),
        "image_std": list(cfg.image_std),
        "transparent_bg_config": cfg.transparent_bg.as_dict() if cfg.transparent_bg else None,
        "transparent_bg_fill_stage": cfg.bg_fill_stage,
    }


def _media_processor(cfg: PreprocessConfig) -> SimpleNamespace:
    """Stand-in for the checkpoint's HF processor: only ``media_proc_cfg`` is read."""
    return SimpleNamespace(media_proc_cfg=media_proc_cfg(cfg))


class _Tokenizer:
    """Stand-in tokenizer: K3's prompt framing encodes control text; no token is needed
    for the features, so it encodes to nothing."""

    def encode(self, text: str, **_: Any) -> list[int]:
        return []


IMAGE_TOKEN_ID = 7


def _wrapper(rt: Runtime, cfg: PreprocessConfig, model_class: str) -> Any:
    """The runtime's GPU processor wrapper of ``model_class`` for this config."""
    media = _media_processor(cfg)
    hf = SimpleNamespace(image_processor=None, tokenizer=_Tokenizer(), media_processor=media)
    if model_class == K25_CLASS:
        m = media.media_proc_cfg
        return rt.sym("KimiGPUProcessorWrapper")(
            hf,
            image_token="<|media_pad|>",
            image_token_id=IMAGE_TOKEN_ID,
            patch_size=m["patch_size"],
            merge_kernel_size=m["merge_kernel_size"],
            in_patch_limit=m["in_patch_limit"],
            patch_limit_on_one_side=m["patch_limit_on_one_side"],
            fixed_output_tokens=m["fixed_output_tokens"],
            image_mean=m["image_mean"],
            image_std=m["image_std"],
        )
    config = rt.sym("KimiK3PreprocessConfig").from_media_processor(media)
    return rt.sym("KimiK3GPUProcessorWrapper")(
        hf, image_token="<|media_pad|>", image_token_id=IMAGE_TOKEN_ID, config=config
    )


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    had = name in vars(owner)
    old = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, name, old)
        else:
            delattr(owner, name)


@contextmanager
def _on_host(rt: Runtime, device: torch.device) -> Iterator[None]:
    """Run the runtime's CUDA producer hooks on a CPU device: ``tensor.cuda()`` returns
    the tensor, and K3's ``to_chw_uint8(image, device="cuda")`` stages on the host."""
    if device.type != "cpu":
        yield
        return
    stage = rt.sym("kimi_k3.to_chw_uint8")
    k3 = rt.modules[K3]
    with (
        _patched(torch.Tensor, "cuda", lambda self, *a, **k: self),
        _patched(k3, "to_chw_uint8", lambda image, device=None: stage(image)),
    ):
        yield


# --- the runtime's functions -----------------------------------------------------------------


def resize_config(rt: Runtime, width: int, height: int, cfg: PreprocessConfig) -> dict[str, int]:
    """``navit_resize_config`` for one size."""
    out = rt.sym("navit_resize_config")(
        width,
        height,
        cfg.patch_size,
        cfg.merge_kernel_size,
        cfg.in_patch_limit,
        cfg.patch_limit_on_one_side,
        cfg.fixed_output_tokens,
    )
    return {k: int(v) for k, v in out.items()}


def should_defer(
    rt: Runtime,
    images: Sequence[Any],
    cfg: PreprocessConfig,
    transport: str = "cpu",
    owner_can_materialize: bool = True,
) -> bool:
    """``KimiK3ImageProcessor._should_defer_gpu_preprocessing`` for one request's images.

    The processor instance is a stand-in with the two attributes the method reads
    (``mm_feature_transport`` and ``_processor.preprocess_config``, the runtime's own
    ``KimiK3PreprocessConfig``); its ``is_cuda()`` probe answers ``owner_can_materialize``.
    """
    config = rt.sym("KimiK3PreprocessConfig").from_media_processor(_media_processor(cfg))
    proc = SimpleNamespace(
        mm_feature_transport=transport, _processor=SimpleNamespace(preprocess_config=config)
    )
    decide = rt.sym("KimiK3ImageProcessor._should_defer_gpu_preprocessing")
    with _patched(rt.modules[K3], "is_cuda", lambda: owner_can_materialize):
        return bool(decide(proc, list(images)))


def eager_features(
    rt: Runtime,
    images: Sequence[Any],
    cfg: PreprocessConfig,
    model_class: str,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager producer: the model's GPU processor wrapper ``_gpu_call`` (K3: to_chw with
    alpha + ``fill_transparent_bg`` after the resize; K2.5: RGB), on ``device``.

    Returns FP32 ``pixel_values`` and ``image_grid_thw``. The prompt is one image token
    per image; its expansion is checked against the plans' token counts."""
    dev = torch.device(device)
    wrapper = _wrapper(rt, cfg, model_class)
    wrapper._get_gpu_norm_tensors(device=dev)  # cached: _gpu_call reuses these
    with _on_host(rt, dev):
        out = wrapper._gpu_call("", list(images), [IMAGE_TOKEN_ID] * len(images))
    grids = out["image_grid_thw"].cpu()
    merge = cfg.merge_kernel_size**2
    expected = sum(int(math.prod(g)) // merge for g in grids.tolist())
    if cfg.fixed_output_tokens is None and out["input_ids"].eq(IMAGE_TOKEN_ID).sum() != expected:
        raise ValueError("the runtime's prompt expansion disagrees with its own grids")
    return out["pixel_values"], grids


def stage(rt: Runtime, obj: Any) -> torch.Tensor:
    """The runtime's deferred producer staging (``to_chw_uint8``, on the CPU)."""
    return rt.sym("to_chw_uint8")(obj)


def deferred_record(rt: Runtime, record: Mapping[str, Any]) -> Any:
    """kimi-bench's record as the runtime's ``KimiK3DeferredPreprocessing``: the dataclass
    refuses a missing or an unknown field, so this also checks the key contract."""

    def plain(v: Any) -> Any:
        return {k: plain(x) for k, x in v.items()} if isinstance(v, Mapping) else v

    fields = {k: plain(v) for k, v in record.items()}
    fields["image_mean"] = list(fields.get("image_mean", ()))
    fields["image_std"] = list(fields.get("image_std", ()))
    return rt.sym("KimiK3DeferredPreprocessing")(**fields)


class _Tower:
    """Stand-in vision tower: the attributes ``get_image_feature`` reads (device, patch
    size, the tower dtype) and a forward that returns its input, so the model method's
    result is the packed feature buffer it built."""

    def __init__(self, device: torch.device, dtype: torch.dtype, patch_size: int) -> None:
        self.device = device
        self.patch_size = patch_size
        self.patch_embed = SimpleNamespace(proj=SimpleNamespace(weight=torch.empty(0, dtype=dtype)))

    def __call__(self, pixel_values: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return pixel_values


def model_features(
    rt: Runtime,
    items: Sequence[tuple[torch.Tensor, tuple[int, int, int], Any]],
    patch_size: int,
    dtype: torch.dtype,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """``KimiK3ForConditionalGeneration.get_image_feature`` over (feature, grid_thw,
    deferred record or None) items, without data parallelism: deferred items are
    materialized by the runtime (``_gpu_preprocess_images`` driven by the record), all
    are packed into one ``dtype`` buffer (``materialize_multimodal_features``)."""
    dev = torch.device(device)
    item_cls, modality = rt.sym("MultimodalDataItem"), rt.sym("Modality")
    key = rt.sym("DEFERRED_PREPROCESSING_KEY")
    mm_items = []
    for feature, grid, record in items:
        data: dict[str, Any] = {"image_grid_thw": torch.tensor([list(grid)], dtype=torch.int64)}
        if record is not None:
            data[key] = record
        mm_items.append(
            item_cls(modality=modality.IMAGE, feature=feature, model_specific_data=data)
        )
    model = SimpleNamespace(
        vision_tower=_Tower(dev, dtype, patch_size),
        mm_projector=lambda x: x,
        use_data_parallel=False,
        _encoder_image_processor=None,
    )
    out: torch.Tensor = rt.sym("KimiK3ForConditionalGeneration.get_image_feature")(model, mm_items)
    return out


def owner_assignment(
    rt: Runtime, sizes: Sequence[int], n_ranks: int
) -> tuple[list[int], list[list[int]]]:
    """``get_dp_encoder_lb_assignment``: owner rank per image, and each rank's images in
    the order the runtime hands them to its loader."""
    order, counts, _ = rt.sym("get_dp_encoder_lb_assignment")(list(sizes), n_ranks)
    owners = [-1] * len(sizes)
    per_rank: list[list[int]] = []
    start = 0
    for rank, n in enumerate(counts):
        mine = list(order[start : start + n])
        for i in mine:
            owners[i] = rank
        per_rank.append(mine)
        start += n
    return owners, per_rank


def skips_pre_embed_move(rt: Runtime, model_class: str, method: str = "get_image_feature") -> bool:
    """``_can_skip_pre_embed_feature_move`` for a bound ``method`` of a class named
    ``model_class`` (the function reads only the class name and the method name)."""

    def embed(self: Any, items: Any) -> Any:
        raise NotImplementedError

    embed.__name__ = method
    cls = type(model_class, (), {method: embed})
    return bool(rt.sym("_can_skip_pre_embed_feature_move")(getattr(cls(), method)))
