"""The producer's feature hash (SPEC section 12), as the runtime profile makes it, timed
in its own stage (``hash``) and written to the ledger.

- ``sglang-0.5.23``, preprocess cache on (its default): every cache miss's feature is
  hashed when its artifact is made (``_make_artifact`` -> ``resolve_multimodal_item_hash``
  -> ``hash_feature`` -> ``tensor_hash([feature])``). A deferred item's raw uint8 is already
  contiguous on the host (``.cpu().contiguous()``): one SHA-256 pass, no copy. An eager
  item's FP32 feature is still on the GPU: ``torch.concat`` of its flattened feature (a
  device copy), then the GPU hash kernel, before the per-item ``.cpu()``.
- ``pr-33921``: ``set_pad_value`` (``_precompute_hashes_before_cpu_transfer``) hashes every
  feature the same way; a PIL-staged deferred feature is the permuted CHW view, so
  ``tensor_hash``'s ``x.flatten()`` first makes a contiguous host copy; a GPU-decoded one
  is hashed on the GPU (concat + kernel) before its ``.cpu()``.
- ``sglang-0.5.23`` with the cache off: the item's identity is the digest of its encoded
  bytes (``kimi_common.py``); no feature is hashed.

The GPU hash kernel (``gpu_tensor_hash``, a Triton kernel ending in ``.item()``) is stood in
for by one device reduction over the feature's 32-bit words and an ``.item()``: one read of
every byte on the device and a synchronize, as the kernel does. Without CUDA the device is
emulated in host memory (the ledger says so)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch

from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.pipeline.step import CPU_STAND_IN, Step

ARTIFACT = "_make_artifact -> resolve_multimodal_item_hash -> hash_feature"
PAD_VALUE = "set_pad_value (_precompute_hashes_before_cpu_transfer) -> hash_feature"


def hashes_features(step: Step) -> bool:
    """Whether this step's runtime hashes the features at the producer."""
    return step.profile.feature_hash != "none"


def _mirrors(step: Step) -> str:
    return ARTIFACT if step.profile.feature_hash == "artifact" else PAD_VALUE


def hash_on_host(step: Step, t: torch.Tensor) -> int:
    """``tensor_hash`` of a host feature: ``x.flatten()`` (a contiguous copy when ``t`` is
    a view that is not), then one SHA-256 pass over its bytes. Returns the first 8 bytes
    of the digest as the runtime does."""
    mirrors = _mirrors(step)
    if not t.is_contiguous():
        step.ledger.add(
            "hash", "hash_flatten", "host", "host", tensor_bytes(t),
            f"{mirrors}: tensor_hash x.flatten()",
        )  # fmt: skip
    flat = t.flatten()
    step.ledger.add("hash", "sha256", "host", "host", tensor_bytes(flat), f"{mirrors}: SHA-256")
    digest = hashlib.sha256(flat.view(torch.uint8).numpy().data).digest()
    return int.from_bytes(digest[:8], "big")


def hash_on_device(step: Step, t: torch.Tensor) -> int:
    """``tensor_hash`` of a device feature: ``torch.concat`` of the flattened feature (a
    device copy), then the GPU hash (a reduction stands in for the kernel) and its
    ``.item()``."""
    stand_in = "" if step.on_cuda else CPU_STAND_IN
    mirrors = _mirrors(step)
    nbytes = tensor_bytes(t)
    step.ledger.add(
        "hash", "hash_concat", "device", "device", nbytes,
        f"{mirrors}: tensor_hash torch.concat" + stand_in,
    )  # fmt: skip
    flat = torch.concat([t.flatten()])
    step.ledger.add(
        "hash", "gpu_hash", "device", "device", nbytes,
        f"{mirrors}: gpu_tensor_hash (a device reduction stands in)" + stand_in,
    )  # fmt: skip
    words = flat.view(torch.int32) if nbytes % 4 == 0 else flat.view(torch.uint8)
    return int(words.sum(dtype=torch.int64).item())


def hash_features(
    step: Step, on_device: Mapping[int, torch.Tensor], on_host: Mapping[int, torch.Tensor]
) -> dict[int, int]:
    """The producer's hash of each feature it made (the runtime's; none when it hashes no
    feature), by item index: device features on the device, host ones on the host."""
    if not hashes_features(step):
        return {}
    out = {i: hash_on_device(step, t) for i, t in on_device.items()}
    out |= {i: hash_on_host(step, t) for i, t in on_host.items()}
    return out
