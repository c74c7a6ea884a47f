"""What each runtime profile does at each step the pipeline emulates (SPEC sections 10-13),
as data the profiles carry (``RuntimeProfile.steps``), and the table rendered from the
profile objects (``runtime_table``; ``docs/generated/runtime-table.md`` is its output, a
test holds them equal: ``python -m kimi_bench.domain.runtime > FILE`` rewrites it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

# (step, SGLang's file and function), in pipeline order; vLLM's cells name their own
STEP_SOURCES: tuple[tuple[str, str], ...] = (
    ("decode a JPEG (CUDA)", "`utils/common.py` `load_image`; 0.5.23: `utils/nvjpeg_decoder.py`"),
    ("stage an image", "`processors/kimi_k3.py` `to_chw_uint8`"),
    ("content digest", "`multimodal/cache/identity.py` `snapshot_media`"),
    ("preprocess cache", "`multimodal/cache/preprocess_cache.py` `MultimodalPreprocessCache`"),
    ("eager producer", "`processors/kimi_k25.py` `_gpu_preprocess_images`"),
    ("deferral decision", "`processors/kimi_k3.py` `_should_defer_gpu_preprocessing`"),
    ("deferred producer", "`_build_deferred_output` / `prepare_artifact_batch`"),
    ("feature hash", "`managers/mm_utils.py` `hash_feature` / `tensor_hash`"),
    ("shm wrap", "`managers/mm_utils.py` `ShmPointerMMData`"),
    ("inline pickle (`--transport pickle`, several nodes)", "tensor transport mode `default`"),
    ("to scheduler rank 0", "tokenizer manager → scheduler (ZMQ)"),
    ("broadcast", "`utils/common.py` `broadcast_pyobj`"),
    ("shm receive", "`managers/mm_utils.py` `unwrap_shm_features`"),
    ("pre-embed move", "`managers/mm_schedule.py` `_can_skip_pre_embed_feature_move`"),
    ("owners", "`multimodal/mm_utils.py` `get_dp_encoder_lb_assignment`"),
    ("owner", "`models/kimi_k3.py`"),
)

PR_STEPS: dict[str, str] = {
    "decode a JPEG (CUDA)": 'torchvision `decode_jpeg(device="cuda")` (nvJPEG, default flags: '
    "nearest chroma upsampling), as the PR's head was benchmarked (before #34163); a CUDA "
    "uint8 CHW tensor; PIL for other bytes, without CUDA, on failure",
    "stage an image": "PIL: `convert` + `np.array(copy=True)`, permuted CHW view; a GPU-decoded "
    "image stays on the GPU (one channel repeated to three there)",
    "content digest": "none: the processor had no image identity",
    "preprocess cache": "none",
    "eager producer": "per-image `.to(device)` of the view (none for a GPU-decoded image), batch "
    "on the GPU, split on the GPU, one `.cpu()` per item",
    "deferral decision": "per request",
    "deferred producer": "the permuted view is the feature (a GPU-decoded image: hashed on the "
    "GPU, then `.cpu()`, the D2H of the raw uint8)",
    "feature hash": "`set_pad_value` hashes every feature: eager FP32 on the GPU "
    "(`torch.concat`, a device copy, then the GPU hash kernel) before its `.cpu()`; a "
    "PIL-staged deferred view: `x.flatten()` (a contiguous host copy), then SHA-256",
    "shm wrap": "`.contiguous()` of a view (HWC→CHW), `posix_fallocate` (reserves the pages), "
    "one copy into the segment",
    "inline pickle (`--transport pickle`, several nodes)": "the tensor pickled as it is (a view "
    "keeps its strides)",
    "to scheduler rank 0": "pickled request",
    "broadcast": "pickle, `np.frombuffer` (no copy), gloo size + bytes; receivers `bytes()` + "
    "`loads`",
    "shm receive": "barrier, `.clone()` per rank per item",
    "pre-embed move": "non-whitelisted models: every rank `.to(device)` every item; "
    "K2.5/K3/Qwen3-VL/Qwen3.5: none",
    "owners": "largest first to the least-loaded rank, lowest rank on ties",
    "owner": "owner-only H2D of raw uint8, materialize, cast into the BF16 tower buffer",
}

NEW_STEPS: dict[str, str] = PR_STEPS | {
    "decode a JPEG (CUDA)": "nvImageCodec (fancy upsampling, planar RGB, two decoders per GPU, "
    "`max_num_cpu_threads=1`); a CUDA uint8 CHW tensor; PIL for other bytes, without CUDA, "
    "when not importable, on failure",
    "content digest": "SHA-256 of each image's encoded bytes, before any decode (the cache key; "
    "with the cache off, the item's identity)",
    "preprocess cache": "on by default: per tokenizer worker, 256 MiB split across the workers, "
    "8192 entries, least recently used out; a hit skips decode, staging, preprocessing, the "
    "feature hash and the producer copy (its CPU feature still goes into a fresh shm "
    "segment); a repeat within a request shares its miss's work",
    "deferral decision": "per image (preprocess cache on); per request with it off",
    "deferred producer": "cache path: `.cpu().contiguous()` (the HWC→CHW copy here; a "
    "GPU-decoded image: the D2H of the raw uint8); cache off: the permuted view",
    "feature hash": "cache on, each miss at `_make_artifact`: deferred raw uint8 (contiguous): "
    "one SHA-256 pass, no copy; eager FP32: `torch.concat` (a device copy), then the GPU hash "
    "kernel, before its `.cpu()`; cache off: none",
    "shm receive": "barrier, copy-on-write map (`mmap.ACCESS_COPY`), no copy",
}


# vLLM 0.33 (SPEC section 13; paths under ``vllm/``) at the same steps: what it does there
VLLM_STEPS: dict[str, str] = {
    "decode a JPEG (CUDA)": "PIL only, in the API server (`multimodal/media/image.py` "
    "`ImageMediaIO.load_bytes`): EXIF orientation applied (`ImageOps.exif_transpose`: a "
    "copy, also without an orientation), transparency composited over white before the "
    "resize (`multimodal/image.py` `rgba_to_rgb`); no GPU decoder",
    "stage an image": "PIL `resize(BICUBIC)` in uint8, then `np.asarray` (two host copies); "
    "zero padding and one write into `(P, 3, 14, 14)` uint8 patches "
    "(`kimi_k25_vision_fused.py` `_write_fused_patches`)",
    "content digest": "blake3 of the encoded bytes (`multimodal/hasher.py`), no pixel read",
    "preprocess cache": "none emulated (the opt-in shm processor cache is not)",
    "eager producer": "the only path: the API server makes uint8 patches of every image "
    "(device normalisation on, vLLM #50411, the K3 default)",
    "deferral decision": "none: vLLM has no deferral (the deferred arms are refused)",
    "deferred producer": "none (refused)",
    "feature hash": "none (the identity is the encoded bytes' digest)",
    "shm wrap": "none; the opt-in tensor arena (#51207, `shm_tensor_arena.py`): each tensor of "
    "8 MiB or more copied once into a slot at EngineCore",
    "inline pickle (`--transport pickle`, several nodes)": "msgpack, tensors of 256 B or more "
    "as out-of-band frames (`v1/serial_utils.py`)",
    "to scheduler rank 0": "API server → EngineCore: ZMQ `send_multipart(copy=False)`, "
    "`torch.frombuffer` on receipt (`v1/engine/core.py`): kernel copies only",
    "broadcast": "EngineCore → every worker, `MessageQueue.enqueue` (`shm_broadcast.py`): "
    "below 16 MiB one copy into the shared-memory ring, each reader copies out; at or "
    "above, one ZMQ delivery per reader, zero-copy rebuild",
    "shm receive": "arena tensors: each reader maps a view (no copy); nothing else",
    "pre-embed move": "every rank, every item: pinned staging (one new pinned buffer, the "
    "items concatenated when several) and `.to(device, non_blocking=True)` "
    "(`v1/worker/gpu/mm/encoder_runner.py`)",
    "owners": "`--mm-encoder-tp-mode weights` (default): every rank runs every image; "
    "`data`: largest first to the least-loaded rank (`vision.py`), then an all-gather",
    "owner": "uint8 → BF16 normalise in one fused kernel on the GPU "
    "(`layers/fusion/mm_input_norm.py`), the rank's own images in `data` mode",
}


class HasSteps(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def steps(self) -> Mapping[str, str]: ...


def runtime_table(profiles: Sequence[HasSteps]) -> str:
    """The Markdown table of emulated steps: a row per step, a column per profile (in the
    order given), a cell that repeats the column before it reads "same"."""
    lines = [
        "| step | SGLang file / function | " + " | ".join(f"`{p.name}`" for p in profiles) + " |",
        "|---|---|" + "---|" * len(profiles),
    ]
    for step, source in STEP_SOURCES:
        cells, before = [], None
        for p in profiles:
            text = p.steps[step]
            cells.append("same" if text == before else text)
            before = text
        lines.append(f"| {step} | {source} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
