"""vLLM 0.33's producer and rank steps in the one pipeline (SPEC section 13; the carrier
between them is ``pipeline.carriers.vllm_mq``). Each step writes the copy ledger with the
vLLM function it mirrors (paths under ``vllm/``); the pixels are
:mod:`kimi_bench.domain.vllm_k3`'s, bit-identical to vLLM's own (``tests/vllm``).

- producer (the API server): decode with PIL (``ImageMediaIO.load_bytes``: EXIF transpose,
  a copy even without an orientation; transparency composited over white, other modes
  converted to RGB), plan, PIL's uint8 bicubic resize and ``np.asarray`` (two host
  copies), zero padding and one write into ``(P, 3, 14, 14)`` uint8 patches; then the
  identity digest of the encoded bytes (blake3). No deferral, no D2H.
- rank step (every worker): every item staged into one new pinned buffer (the items
  concatenated when several; an item that already is a pinned view, alone, is not
  copied) and copied to the device, ``encoder_runner.py``; then the encoder's TP mode:
  ``weights`` runs every image on every rank, ``data`` only the greedy owners' (their
  slices concatenated on the device); the fused uint8 -> BF16 normalisation
  (``mm_input_norm.py``) makes the tower buffer.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from kimi_bench.domain import vllm_k3
from kimi_bench.domain.contract import GRID_KEY, MMItem, grid_tensor
from kimi_bench.domain.encoded import EncodedImage
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.navit import ResizePlan, plan_resize
from kimi_bench.domain.pixels import StagingError
from kimi_bench.domain.policy import Decision
from kimi_bench.domain.scheduler import assign_owners, images_of_rank
from kimi_bench.pipeline.step import CPU_STAND_IN, RankOutput, Step
from kimi_bench.pipeline.steps import to_device

MEDIA = "multimodal/media/image.py ImageMediaIO.load_bytes"
FUSED = "kimi_k25_vision_fused.py"
RUNNER = "v1/worker/gpu/mm/encoder_runner.py"
PIL_DECODER = ("pil", "vLLM 0.33: the API server decodes with PIL (EXIF orientation applied)")


# an item whose feature is a reader's view of an arena slot (``carriers.vllm_mq``)
ARENA_VIEW_KEY = "kimi_bench_vllm_arena_view"


def _bands_bytes(image: Image.Image, mode: str) -> int:
    return image.width * image.height * Image.getmodebands(mode)


def decode(step: Step, obj: Any) -> vllm_k3.Decoded:
    """An input as vLLM's API server holds it after ``load_bytes``: encoded bytes decoded
    (in the ledger: the decode, the EXIF transpose's copy, the RGB conversion); a PIL
    image handed already decoded only converted (no EXIF to apply, nothing decoded)."""
    if isinstance(obj, EncodedImage):
        try:
            decoded = vllm_k3.decode(obj.data)
        except ValueError as exc:
            raise StagingError(str(exc)) from None
        step.decodes.append(PIL_DECODER)
        raw = _bands_bytes(decoded.image, decoded.source_mode)
        step.ledger.add("producer", "decode", "host", "pil", raw, f"{MEDIA}: Image.open + load")
        step.ledger.add(
            "producer", "exif_transpose", "pil", "pil", raw, f"{MEDIA}: ImageOps.exif_transpose"
        )
    elif isinstance(obj, Image.Image):
        rgb, composited = vllm_k3.to_rgb(obj)
        decoded = vllm_k3.Decoded(
            rgb, obj.size, False, composited, not composited and rgb is not obj, obj.mode
        )
    else:
        raise StagingError(
            f"vLLM's API server takes images (encoded bytes), not {type(obj).__name__}"
        )
    rgb_bytes = _bands_bytes(decoded.image, "RGB")
    if decoded.composited:
        if decoded.source_mode != "RGBA":
            raw = _bands_bytes(decoded.image, "RGBA")
            step.ledger.add("producer", "convert", "pil", "pil", raw, "rgba_to_rgb: convert(RGBA)")
        step.ledger.add(
            "producer", "composite", "pil", "pil", rgb_bytes, "multimodal/image.py rgba_to_rgb"
        )
    elif decoded.converted:
        step.ledger.add("producer", "convert", "pil", "pil", rgb_bytes, "convert_image_mode")
    return decoded


def patches(step: Step, decoded: vllm_k3.Decoded) -> tuple[torch.Tensor, ResizePlan]:
    """The fused processor's uint8 patches of one decoded image and its plan (from the
    oriented size), in the ledger."""
    plan = plan_resize(decoded.image.width, decoded.image.height, step.cfg)
    arr = vllm_k3.resize(decoded.image, plan)
    step.ledger.add("producer", "pil_resize", "pil", "pil", arr.nbytes, f"{FUSED}: resize(BICUBIC)")
    step.ledger.add("producer", "to_numpy", "pil", "host", arr.nbytes, f"{FUSED}: np.asarray")
    out = vllm_k3.patchify(arr, plan)
    step.ledger.add(
        "producer", "patchify", "host", "host", tensor_bytes(out), f"{FUSED}: _write_fused_patches"
    )
    return out, plan


def _digest(data: bytes) -> tuple[str, str]:
    """The identity digest of encoded bytes: blake3 as vLLM does when the package is
    installed; hashlib's blake2b stands in otherwise (the mirrors say which)."""
    try:
        blake3: Any = importlib.import_module("blake3")
    except ImportError:
        return hashlib.blake2b(data).hexdigest(), " [blake3 not installed: blake2b stands in]"
    return blake3.blake3(data).hexdigest(), ""


def produce(
    step: Step, images: Sequence[Any], plans: Sequence[ResizePlan], decisions: Sequence[Decision]
) -> list[MMItem]:
    """The API server's step: uint8 patches of every image, in input order (``plans`` are
    the headers': an EXIF rotation changes vLLM's own, made after the decode). Marks
    ``producer``, ``hash`` (the identity digest of encoded inputs) and ``d2h`` (none)."""
    items: list[MMItem] = []
    for obj in images:
        out, plan = patches(step, decode(step, obj))
        items.append(MMItem(out, {GRID_KEY: grid_tensor(plan)}))
    step.hook.mark("producer")
    for obj in images:
        if isinstance(obj, EncodedImage):
            _, note = _digest(obj.data)
            mirrors = "multimodal/hasher.py: blake3 of the encoded bytes" + note
            step.ledger.add("hash", "blake3", "host", "host", len(obj.data), mirrors)
    step.hook.mark("hash")
    step.hook.mark("d2h")
    return items


# ---------------------------------------------------------------------------- rank step


def stage_pinned(step: Step, feats: Sequence[torch.Tensor], pinned: bool) -> torch.Tensor:
    """Every item's bytes in one pinned host buffer (``torch.cat`` into it when several;
    ``pinned``: the only item already is a pinned view, kept as it is). Without CUDA
    nothing can be page-locked and a host copy stands in."""
    if pinned and len(feats) == 1:
        return feats[0]
    flat = feats[0].dtype
    shape = (sum(int(f.shape[0]) for f in feats), *feats[0].shape[1:])
    mirrors = f"{RUNNER}: pinned staging" + (" (torch.cat)" if len(feats) > 1 else "")
    if step.on_cuda:
        buf = torch.empty(shape, dtype=flat, pin_memory=True)
    else:
        buf, mirrors = torch.empty(shape, dtype=flat), mirrors + CPU_STAND_IN
    torch.cat(list(feats), out=buf)
    step.ledger.add("pre_embed_move", "pinned_staging", "host", "host", tensor_bytes(buf), mirrors)
    return buf


def rank_step(
    step: Step,
    items: list[MMItem],
    rank: int,
    world: int,
    decode_errors: list[tuple[int, str]] | None = None,
) -> RankOutput:
    """A worker's step: pinned staging and H2D of every item (marks ``pre_embed_move``;
    ``owner_h2d`` is empty: vLLM has no owner-only copy), then the encoder's TP mode and
    the fused normalisation into the BF16 tower buffer (``owner_materialize``)."""
    sizes = [it.num_patches for it in items]
    owners = assign_owners(sizes, world)
    dev: torch.Tensor | None = None
    if items:
        pinned = bool(items[0].model_specific_data.get(ARENA_VIEW_KEY))
        host = stage_pinned(step, [it.feature for it in items], pinned)
        dev = to_device(step, host, "pre_embed_move", f"{RUNNER}: .to(device, non_blocking=True)")
    step.hook.mark("pre_embed_move")
    step.hook.mark("owner_h2d")
    data_mode = step.profile.encoder_tp_mode == "data"
    mine = images_of_rank(owners, rank) if data_mode else list(range(len(items)))
    tower = None
    if dev is not None and mine:
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        # data mode: the owned slices concatenated on the device (vision.py)
        x = torch.cat([dev[starts[i] : starts[i] + sizes[i]] for i in mine]) if data_mode else dev
        p = step.cfg.patch_size
        tower = vllm_k3.normalize_bf16(x, step.cfg).view(-1, 3, p, p)
    step.hook.mark("owner_materialize")
    return RankOutput(owners, mine, None, tower, sizes, replicated=not data_mode)
