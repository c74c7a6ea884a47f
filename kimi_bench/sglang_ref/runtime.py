"""Find the installed SGLang runtime: import its modules once and look up, by name, every
function the reference calls (:mod:`.calls` calls them as shipped). Nothing in this package
copies the runtime's arithmetic.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

TESTED_VERSION = "0.5.23"
INSTALL_HINT = (
    "build the reference environment with `scripts/sglang-env.sh VENV_DIR` (it installs "
    f"requirements-sglang.txt: sglang=={TESTED_VERSION} with --no-deps plus the light "
    "packages its modules import), then run kimi-bench with VENV_DIR/bin/python"
)

K25 = "sglang.srt.multimodal.processors.kimi_k25"
K3 = "sglang.srt.multimodal.processors.kimi_k3"
K3_IMAGES = "sglang.srt.multimodal.kimi_k3_image_processing"
K3_ARTIFACTS = "sglang.srt.multimodal.media_artifacts.kimi_k3"
K3_MODEL = "sglang.srt.models.kimi_k3"
MM_UTILS = "sglang.srt.multimodal.mm_utils"
SCHEDULE = "sglang.srt.managers.mm_schedule"
MANAGER_MM = "sglang.srt.managers.mm_utils"
BATCH = "sglang.srt.managers.schedule_batch"
COMMON = "sglang.srt.utils.common"
IO_STRUCT = "sglang.srt.managers.io_struct"
CONTEXT = "sglang.srt.runtime_context"
SHM_NAMES = "sglang.srt.utils.stale_shm_cleanup"

# name -> (module, attribute path); every one must exist in the installed version.
SYMBOLS: dict[str, tuple[str, str]] = {
    "navit_resize_config": (K25, "navit_resize_config"),
    "_gpu_preprocess_images": (K25, "_gpu_preprocess_images"),
    "KimiGPUProcessorWrapper": (K25, "KimiGPUProcessorWrapper"),
    "KimiGPUProcessorWrapper._gpu_call": (K25, "KimiGPUProcessorWrapper._gpu_call"),
    "KimiK2_5VLImageProcessor": (K25, "KimiK2_5VLImageProcessor"),
    "KimiK3GPUProcessorWrapper": (K3, "KimiK3GPUProcessorWrapper"),
    "KimiK3GPUProcessorWrapper._gpu_call": (K3, "KimiK3GPUProcessorWrapper._gpu_call"),
    "KimiK3ImageProcessor._should_defer_gpu_preprocessing": (
        K3,
        "KimiK3ImageProcessor._should_defer_gpu_preprocessing",
    ),
    "kimi_k3.is_cuda": (K3, "is_cuda"),
    "kimi_k3.to_chw_uint8": (K3, "to_chw_uint8"),
    "to_chw_uint8": (K3_IMAGES, "to_chw_uint8"),
    "KimiK3DeferredPreprocessing": (K3_IMAGES, "KimiK3DeferredPreprocessing"),
    "DEFERRED_PREPROCESSING_KEY": (K3_IMAGES, "DEFERRED_PREPROCESSING_KEY"),
    "KimiK3PreprocessConfig": (K3_ARTIFACTS, "KimiK3PreprocessConfig"),
    "KimiK3ForConditionalGeneration.get_image_feature": (
        K3_MODEL,
        "KimiK3ForConditionalGeneration.get_image_feature",
    ),
    "MultimodalDataItem": (BATCH, "MultimodalDataItem"),
    "Modality": (BATCH, "Modality"),
    "materialize_multimodal_features": (MM_UTILS, "materialize_multimodal_features"),
    "get_dp_encoder_lb_assignment": (MM_UTILS, "get_dp_encoder_lb_assignment"),
    "_can_skip_pre_embed_feature_move": (SCHEDULE, "_can_skip_pre_embed_feature_move"),
    "wrap_shm_features": (MANAGER_MM, "wrap_shm_features"),
    "unwrap_shm_features": (MANAGER_MM, "unwrap_shm_features"),
    "ShmPointerMMData": (MANAGER_MM, "ShmPointerMMData"),
    "broadcast_pyobj": (COMMON, "broadcast_pyobj"),
    "load_image": (COMMON, "load_image"),
    "KimiK3ImageProcessor": (K3, "KimiK3ImageProcessor"),
    "has_shm_features": (MANAGER_MM, "has_shm_features"),
    "TokenizedGenerateReqInput": (IO_STRUCT, "TokenizedGenerateReqInput"),
    "MultimodalProcessorOutput": (BATCH, "MultimodalProcessorOutput"),
    "get_context": (CONTEXT, "get_context"),
    "make_shm_name": (SHM_NAMES, "make_shm_name"),
}

# The model class whose processor and hooks the runtime uses per preset.
K3_CLASS = "KimiK3ForConditionalGeneration"
K25_CLASS = "KimiK25ForConditionalGeneration"


class SglangUnavailable(RuntimeError):
    """The reference runtime cannot be used; the message says why and what to do."""


class SglangMissingError(SglangUnavailable):
    """sglang (or one of the packages its modules import) is not installed."""


class SglangVersionError(SglangUnavailable):
    """The installed sglang lacks a function the reference calls."""


def _installed_version() -> str:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# Kept alive for the process: the operator names torchvision's Python half registers
# fake kernels for. Defined only when its C extension could not define them.
_TORCHVISION_OPS: list[torch.library.Library] = []


def _torchvision_without_ops() -> None:
    """Import torchvision when its C extension cannot load.

    PyPI's torchvision wheels link the CUDA build of torch; beside a CPU torch their C
    ops never load and ``import torchvision`` stops at ``register_fake("torchvision::nms")``.
    sglang (and transformers) import torchvision for its Python transforms only, so the
    two operator names are declared (no kernels) and the import is retried.
    """
    if importlib.util.find_spec("torchvision") is None or "torchvision" in sys.modules:
        return
    try:
        importlib.import_module("torchvision")
        return
    except RuntimeError as exc:
        if "torchvision::" not in str(exc):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _TORCHVISION_OPS.append(lib)
    importlib.import_module("torchvision")


def _import(module: str, version: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or str(exc)
        if missing == "sglang" or missing.startswith("sglang."):
            if version == "unknown":
                raise SglangMissingError(
                    f"sglang is not installed for {sys.executable}; {INSTALL_HINT}"
                ) from None
            raise SglangVersionError(
                f"sglang {version} has no module {missing} (the reference was written "
                f"against sglang {TESTED_VERSION}); {INSTALL_HINT}"
            ) from None
        raise SglangMissingError(
            f"importing {module} from sglang {version} needs the package that provides "
            f"{missing!r}, which is not installed; {INSTALL_HINT}"
        ) from None
    except Exception as exc:  # an incompatible dependency, a failing import-time hook
        first = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise SglangUnavailable(
            f"importing {module} from sglang {version} failed ({first}); {INSTALL_HINT}"
        ) from None


def _resolve(module: ModuleType, path: str) -> Any:
    obj: Any = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Runtime:
    """The installed sglang: its version, location and the functions the reference uses."""

    version: str
    location: str
    symbols: Mapping[str, Any]
    modules: Mapping[str, ModuleType]

    def sym(self, name: str) -> Any:
        return self.symbols[name]

    @property
    def model_defers(self) -> dict[str, bool]:
        """Whether each model's processor has a deferral path at all."""
        k25 = self.sym("KimiK2_5VLImageProcessor")
        return {
            K3_CLASS: True,
            K25_CLASS: hasattr(k25, "_should_defer_gpu_preprocessing"),
        }


_CACHE: list[Runtime] = []


def load_runtime() -> Runtime:
    """Import the runtime's modules once and look up every function the reference calls.

    Raises :class:`SglangMissingError` (with the install hint) when sglang or one of the
    packages its modules import is missing, :class:`SglangVersionError` naming the
    function and the version when the installed sglang lacks one.
    """
    if _CACHE:
        return _CACHE[0]
    if importlib.util.find_spec("sglang") is None:
        raise SglangMissingError(f"sglang is not installed for {sys.executable}; {INSTALL_HINT}")
    version = _installed_version()
    _torchvision_without_ops()
    modules: dict[str, ModuleType] = {}
    symbols: dict[str, Any] = {}
    for name, (module, path) in SYMBOLS.items():
        if module not in modules:
            modules[module] = _import(module, version)
        try:
            symbols[name] = _resolve(modules[module], path)
        except AttributeError:
            raise SglangVersionError(
                f"sglang {version} has no {module}.{path} (the reference was written "
                f"against sglang {TESTED_VERSION}); {INSTALL_HINT}"
            ) from None
    top = sys.modules["sglang"]
    location = str(getattr(top, "__path__", ["?"])[0])
    rt = Runtime(version, location, symbols, modules)
    _CACHE.append(rt)
    return rt
