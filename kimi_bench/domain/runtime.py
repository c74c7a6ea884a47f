"""Runtime profiles: which version of the runtime's behaviour the pipeline emulates.

The two profiles differ where the runtime changed between the PR that introduced deferred
preprocessing (SGLang PR #33921) and the ``sglang`` 0.5.23 release (SPEC section 10):

- how a scheduler rank takes a shared-memory feature: the PR clones it out of the segment
  after a barrier; 0.5.23 maps the segment copy-on-write (``mmap.ACCESS_COPY``), no copy;
- the deferral decision: per request in the PR; per image in 0.5.23 (preprocess cache on,
  the default).

Everything else (staging, the eager producer's GPU preprocess and per-item ``.cpu()``, the
shm wrap, ``broadcast_pyobj``, the pre-embed whitelist, owner-only materialization) is the
same in both. ``EMULATED_STEPS`` is the table the README prints (``steps_table``; a test
checks they agree): every step, the upstream function it follows, and what each profile
does there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Literal

ReceiverCopy = Literal["clone", "map"]
DecisionScope = Literal["request", "image"]
FeatureHash = Literal["artifact", "pad_value", "none"]
CACHE_OFF: Final = "+cache-off"  # a profile's spec with its preprocess cache off


@dataclass(frozen=True)
class RuntimeProfile:
    name: str
    receiver: ReceiverCopy
    decision_scope: DecisionScope
    # 0.5.23's preprocess-cache path stores deferred features as
    # ``to_chw_uint8(image).cpu().contiguous()`` at the producer; the PR's uncached path keeps
    # the permuted view (the shm wrap makes it contiguous; inline pickle sends it as is).
    deferred_contiguous_at_producer: bool
    # how the processor decodes a JPEG on CUDA (``load_image``; PIL without CUDA, for other
    # formats and as the fallback): a name of ``kimi_bench.domain.decoders``
    decoder: str
    description: str
    # the processor's content-addressed preprocess cache (SPEC section 12): whether this
    # runtime has one, whether it is on, its service-wide budget (split across tokenizer
    # workers, ``base_processor.py``) and its entry bound
    has_preprocess_cache: bool = False
    preprocess_cache: bool = False
    preprocess_cache_mib: int = 0
    preprocess_cache_entries: int = 0

    @property
    def feature_hash(self) -> FeatureHash:
        """Where the producer hashes a feature: ``artifact`` (0.5.23, cache on: every
        miss, ``_make_artifact`` -> ``resolve_multimodal_item_hash`` -> ``hash_feature``),
        ``pad_value`` (the PR era: ``set_pad_value`` hashes every feature), ``none`` (0.5.23,
        cache off: the identity is the encoded bytes' digest, no feature is hashed)."""
        if self.preprocess_cache:
            return "artifact"
        return "none" if self.has_preprocess_cache else "pad_value"

    @property
    def spec(self) -> str:
        """The name ``get_profile`` takes back (``+cache-off`` when the cache is off)."""
        off = self.has_preprocess_cache and not self.preprocess_cache
        return self.name + (CACHE_OFF if off else "")

    def cache_bytes(self, tokenizer_workers: int = 1) -> int:
        """One producer's cache budget: the service-wide MiB split across tokenizer workers
        (``worker_cache_bytes = total_cache_mb * 1024 * 1024 // tokenizer_worker_num``)."""
        if not self.preprocess_cache:
            return 0
        return self.preprocess_cache_mib * 1024 * 1024 // max(1, tokenizer_workers)

    def with_preprocess_cache(self, on: bool) -> RuntimeProfile:
        """This runtime with its preprocess cache on or off. Off (0.5.23's uncached path,
        ``kimi_k3.py:750-762``): the decision is per request and the deferred feature is
        the permuted view, as in the PR era; the PR era has no cache to turn on."""
        if on == self.preprocess_cache:
            return self
        if not self.has_preprocess_cache:
            raise UnknownRuntime(f"{self.name} has no preprocess cache to turn on")
        return replace(
            self,
            preprocess_cache=on,
            decision_scope="image" if on else "request",
            deferred_contiguous_at_producer=on,
        )

    def summary(self) -> dict[str, str]:
        return {
            "name": self.name,
            "shm_receiver": self.receiver,
            "decision_scope": self.decision_scope,
            "deferred_contiguous_at_producer": str(self.deferred_contiguous_at_producer),
            "decoder": self.decoder,
            "preprocess_cache": (
                f"on ({self.preprocess_cache_mib} MiB, split across tokenizer workers)"
                if self.preprocess_cache
                else "off"
                if self.has_preprocess_cache
                else "none"
            ),
            "feature_hash": self.feature_hash,
            "description": self.description,
        }


PROFILES: dict[str, RuntimeProfile] = {
    "sglang-0.5.23": RuntimeProfile(
        name="sglang-0.5.23",
        receiver="map",
        decision_scope="image",
        deferred_contiguous_at_producer=True,
        decoder="nvimgcodec",
        description="sglang 0.5.23 on PyPI: shm receivers map the segment copy-on-write; "
        "per-image deferral decision (preprocess cache on); JPEGs on CUDA decoded by "
        "nvImageCodec (fancy upsampling)",
        has_preprocess_cache=True,
        preprocess_cache=True,
        preprocess_cache_mib=256,  # auto_mm_preprocess_cache_size_mb (kimi_k3.py:387)
        preprocess_cache_entries=8192,  # MultimodalPreprocessCache(max_entries=8192)
    ),
    "pr-33921": RuntimeProfile(
        name="pr-33921",
        receiver="clone",
        decision_scope="request",
        deferred_contiguous_at_producer=False,
        decoder="nvjpeg",
        description="SGLang PR #33921 as merged: shm receivers clone every item; "
        "per-request deferral decision; JPEGs on CUDA decoded by torchvision's nvJPEG",
    ),
}
DEFAULT_RUNTIME: Final = "sglang-0.5.23"  # the newest


class UnknownRuntime(ValueError):
    pass


def get_profile(name: str | None) -> RuntimeProfile:
    """A profile by name, or by its ``spec`` (``sglang-0.5.23+cache-off``)."""
    key = name or DEFAULT_RUNTIME
    off = key.endswith(CACHE_OFF)
    base = key.removesuffix(CACHE_OFF)
    try:
        profile = PROFILES[base]
    except KeyError:
        raise UnknownRuntime(
            f"unknown runtime profile {key!r}; expected one of {', '.join(PROFILES)}"
        ) from None
    return profile.with_preprocess_cache(False) if off else profile


def runtime_spec(name: str, preprocess_cache: bool) -> str:
    """The spec of ``name`` with its preprocess cache as asked (a runtime without one
    ignores the flag: it has none to turn off)."""
    profile = get_profile(name)
    return (
        profile.with_preprocess_cache(preprocess_cache).spec
        if profile.has_preprocess_cache
        else profile.spec
    )


# (step, upstream file and function, PR era, 0.5.23)
EMULATED_STEPS: tuple[tuple[str, str, str, str], ...] = (
    (
        "decode a JPEG (CUDA)",
        "`utils/common.py` `load_image`; 0.5.23: `utils/nvjpeg_decoder.py`",
        'torchvision `decode_jpeg(device="cuda")` (nvJPEG, default flags: nearest chroma '
        "upsampling); a CUDA uint8 CHW tensor; PIL for other bytes, without CUDA, on failure",
        "nvImageCodec (fancy upsampling, planar RGB, two decoders per GPU); a CUDA uint8 CHW "
        "tensor; PIL for other bytes, without CUDA, when not importable, on failure",
    ),
    (
        "stage an image",
        "`processors/kimi_k3.py` `to_chw_uint8`",
        "PIL: `convert` + `np.array(copy=True)`, permuted CHW view; a GPU-decoded image stays "
        "on the GPU (one channel repeated to three there)",
        "same",
    ),
    (
        "eager producer",
        "`processors/kimi_k25.py` `_gpu_preprocess_images`",
        "per-image `.to(device)` of the view (none for a GPU-decoded image), batch on the "
        "GPU, split on the GPU, one `.cpu()` per item",
        "same",
    ),
    (
        "deferral decision",
        "`processors/kimi_k3.py` `_should_defer_gpu_preprocessing`",
        "per request",
        "per image (preprocess cache on)",
    ),
    (
        "deferred producer",
        "`_build_deferred_output` / `prepare_artifact_batch`",
        "the permuted view is the feature (a GPU-decoded image: `.cpu()`, the D2H of the raw "
        "uint8, before the carrier)",
        "cache path: `.cpu().contiguous()` (the HWC→CHW copy here; a GPU-decoded image: the "
        "D2H of the raw uint8)",
    ),
    (
        "shm wrap",
        "`managers/mm_utils.py` `ShmPointerMMData`",
        "`.contiguous()` (HWC→CHW), `posix_fallocate`, one copy into the segment",
        "one copy into the segment",
    ),
    (
        "inline pickle (`--transport pickle`, several nodes)",
        "tensor transport mode `default`",
        "the tensor pickled as it is (a view keeps its strides)",
        "same",
    ),
    (
        "to scheduler rank 0",
        "tokenizer manager → scheduler (ZMQ)",
        "pickled request",
        "same",
    ),
    (
        "broadcast",
        "`utils/common.py` `broadcast_pyobj`",
        "pickle, `np.frombuffer` (no copy), gloo size + bytes; receivers `bytes()` + `loads`",
        "same",
    ),
    (
        "shm receive",
        "`managers/mm_utils.py` `unwrap_shm_features`",
        "barrier, `.clone()` per rank per item",
        "barrier, copy-on-write map (`mmap.ACCESS_COPY`), no copy",
    ),
    (
        "pre-embed move",
        "`managers/mm_schedule.py` `_can_skip_pre_embed_feature_move`",
        "non-whitelisted models: every rank `.to(device)` every item; "
        "K2.5/K3/Qwen3-VL/Qwen3.5: none",
        "same",
    ),
    (
        "owners",
        "`multimodal/mm_utils.py` `get_dp_encoder_lb_assignment`",
        "largest first to the least-loaded rank, lowest rank on ties",
        "same",
    ),
    (
        "owner",
        "`models/kimi_k3.py`",
        "owner-only H2D of raw uint8, materialize, cast into the BF16 tower buffer",
        "same",
    ),
)


def steps_table() -> str:
    """The README's table of emulated steps (a test checks that the README shows this)."""
    lines = [
        "| step | upstream file / function | `pr-33921` | `sglang-0.5.23` |",
        "|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in EMULATED_STEPS]
    return "\n".join(lines)
