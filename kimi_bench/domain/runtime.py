"""Runtime profiles: which version of the runtime's behaviour the pipeline emulates.

The two profiles differ where the runtime changed between the PR that introduced deferred
preprocessing (SGLang PR #33921) and the ``sglang`` 0.5.23 release (SPEC sections 10-12):

- how a scheduler rank takes a shared-memory feature: the PR clones it out of the segment
  after a barrier; 0.5.23 maps the segment copy-on-write (``mmap.ACCESS_COPY``), no copy;
- the deferral decision: per request in the PR; per image in 0.5.23 (preprocess cache on,
  the default);
- the producer's feature hash and the preprocess cache: the PR hashes every feature at
  ``set_pad_value`` and has no cache; 0.5.23 digests each image's encoded bytes, keeps a
  content-addressed cache per tokenizer worker and hashes each miss's feature
  (``with_preprocess_cache(False)``: no cache, no feature hash, per-request decisions);
- the JPEG decoder on CUDA: ``pr-33921`` copies the PR's head as it was benchmarked
  (2026-08-07, torchvision's nvJPEG). The PR merged as ``22e003580bc0032918f1ebd1111de4850e33ec0f``
  (2026-08-09T08:13Z), before upstream #34163 (nvImageCodec, ``"nvjpeg_fancy"``) merged as
  ``c20e99bd22`` (2026-08-10), so "as merged" decoded as the head did (docs/pipeline.md
  says where both hashes come from; the head's hash is not known).

Everything else (staging, the eager producer's GPU preprocess and per-item ``.cpu()``, the
shm wrap, ``broadcast_pyobj``, the pre-embed whitelist, owner-only materialization) is the
same in both. Each profile carries what it does at every emulated step (``steps``, from
``runtime_steps``); ``steps_table`` renders the table from the profile objects
(``docs/generated/runtime-table.md``; a test checks they agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from kimi_bench.domain.runtime_steps import NEW_STEPS, PR_STEPS, runtime_table

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
    era: int = 0  # the order the runtime's states came in (the table's columns follow it)
    # what the profile does at each emulated step (``runtime_steps.STEP_SOURCES``)
    steps: Mapping[str, str] = field(default_factory=dict, compare=False)
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
        era=1,
        steps=NEW_STEPS,
    ),
    "pr-33921": RuntimeProfile(
        name="pr-33921",
        receiver="clone",
        decision_scope="request",
        deferred_contiguous_at_producer=False,
        decoder="nvjpeg",
        description="SGLang PR #33921 at its head, as benchmarked (2026-08-07, before "
        "upstream #34163 moved K3's JPEG decode to nvImageCodec): shm receivers clone every "
        "item; per-request deferral decision; every feature hashed at set_pad_value; no "
        "preprocess cache; JPEGs on CUDA decoded by torchvision's nvJPEG",
        steps=PR_STEPS,
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


def table_profiles() -> list[RuntimeProfile]:
    """The profiles in the order the runtime changed (the PR era first)."""
    return sorted(PROFILES.values(), key=lambda p: p.era)


def steps_table() -> str:
    """The table of emulated steps, rendered from the profile objects (``runtime_steps``;
    ``docs/generated/runtime-table.md`` holds it, a test checks they agree)."""
    return runtime_table(table_profiles())


if __name__ == "__main__":  # python -m kimi_bench.domain.runtime > docs/generated/runtime-table.md
    print(steps_table(), end="")
