"""Hold kimi-bench's vLLM K3 path (:mod:`kimi_bench.domain.vllm_k3`) against vLLM's own code.

Imported only when asked for: importing this package does not import vllm; :func:`load`
does, and raises :class:`VllmMissingError` with the install hint (``scripts/vllm-env.sh``)
or :class:`VllmVersionError` naming the installed version.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.vllm_k3 import VLLM_VERSION

INSTALL_HINT = (
    "build the vLLM reference environment with `scripts/vllm-env.sh VENV_DIR` "
    "(vllm==0.33.0 --no-deps plus requirements-vllm.txt) and run from it"
)


class VllmMissingError(RuntimeError):
    pass


class VllmVersionError(RuntimeError):
    pass


@dataclass(frozen=True)
class Reference:
    """vLLM's own K3 image-path functions, called as shipped."""

    version: str
    media_io: Any  # vllm.multimodal.media.image.ImageMediaIO
    processor_cls: Any  # KimiK25FusedVisionProcessor

    def decode(self, data: bytes) -> Any:
        """The RGB PIL image ``ImageMediaIO().load_bytes`` gives."""
        return self.media_io().load_bytes(data).media

    def patches(self, data: bytes, cfg: PreprocessConfig) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pixel_values, grid_thws)`` of one encoded image, device normalisation on."""
        processor = self.processor_cls(media_proc_config(cfg))
        out = processor.preprocess(
            [{"type": "image", "image": self.decode(data)}], do_rescale=False, do_normalize=False
        )
        return out["pixel_values"], out["grid_thws"]


def media_proc_config(cfg: PreprocessConfig) -> dict[str, Any]:
    """The checkpoint's ``media_proc_cfg`` for a kimi-bench preset (image keys only)."""
    return {
        "patch_size": cfg.patch_size,
        "merge_kernel_size": cfg.merge_kernel_size,
        "in_patch_limit": cfg.in_patch_limit,
        "patch_limit_on_one_side": cfg.patch_limit_on_one_side,
        "fixed_output_tokens": cfg.fixed_output_tokens,
        "temporal_merge_kernel_size": 4,
        "image_mean": list(cfg.image_mean),
        "image_std": list(cfg.image_std),
    }


def load() -> Reference:
    try:
        vllm = importlib.import_module("vllm")
        media = importlib.import_module("vllm.multimodal.media.image")
        fused = importlib.import_module("vllm.transformers_utils.processors.kimi_k25_vision_fused")
    except ImportError as exc:
        raise VllmMissingError(
            f"vLLM's K3 image path is not importable ({exc}); {INSTALL_HINT}"
        ) from None
    version = str(getattr(vllm, "__version__", "unknown"))
    if version != VLLM_VERSION:
        raise VllmVersionError(
            f"kimi-bench's vLLM path copies vllm {VLLM_VERSION}; vllm {version} is installed"
        )
    return Reference(version, media.ImageMediaIO, fused.KimiK25FusedVisionProcessor)
