"""Runtime profiles: which version of the runtime's behaviour the pipeline emulates.

The two profiles differ where the runtime changed between the PR that introduced deferred
preprocessing (SGLang PR #33921) and the ``sglang`` 0.5.23 release (SPEC section 10):

- how a scheduler rank takes a shared-memory feature: the PR clones it out of the segment
  after a barrier; 0.5.23 maps the segment copy-on-write (``mmap.ACCESS_COPY``), no copy;
- the deferral decision: per request in the PR; per image in 0.5.23 (preprocess cache on,
  the default).

Everything else (staging, the eager producer's GPU preprocess and per-item ``.cpu()``, the
shm wrap, ``broadcast_pyobj``, the pre-embed whitelist, owner-only materialization) is the
same in both. ``EMULATED_STEPS`` is the table docs/pipeline.md prints (``steps_table``; a test
checks they agree): every step, the upstream function it follows, and what each profile
does there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

ReceiverCopy = Literal["clone", "map"]
DecisionScope = Literal["request", "image"]


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

    def summary(self) -> dict[str, str]:
        return {
            "name": self.name,
            "shm_receiver": self.receiver,
            "decision_scope": self.decision_scope,
            "deferred_contiguous_at_producer": str(self.deferred_contiguous_at_producer),
            "decoder": self.decoder,
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
    key = name or DEFAULT_RUNTIME
    try:
        return PROFILES[key]
    except KeyError:
        raise UnknownRuntime(
            f"unknown runtime profile {key!r}; expected one of {', '.join(PROFILES)}"
        ) from None


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
    """The table of emulated steps in docs/pipeline.md (a test checks that the page shows this)."""
    lines = [
        "| step | upstream file / function | `pr-33921` | `sglang-0.5.23` |",
        "|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in EMULATED_STEPS]
    return "\n".join(lines)
