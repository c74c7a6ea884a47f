"""The pipeline's steps: producer (tokenizer worker), carriers, rank step. Every byte
move is written to ``Step.ledger``; ``Step.hook.mark(stage)`` closes a timed stage. The
order they run in is ``pipeline.recipe``'s (written once there); which of them an arm or
a carrier uses is the arm's or carrier's object (``pipeline.arms``, ``pipeline.carriers``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
from PIL import Image

from kimi_bench.domain.contract import (
    DEFERRED_KEY,
    ENCODED_KEY,
    GRID_KEY,
    ContractError,
    FrozenRecord,
    MMItem,
    grid_tensor,
    make_deferred_record,
)
from kimi_bench.domain.device_image import DeviceImage
from kimi_bench.domain.encoded import (
    EncodedImage,
    check_decoded,
    encoded_feature,
    encoded_record,
)
from kimi_bench.domain.ledger import tensor_bytes
from kimi_bench.domain.materialize import (
    materialize,
    materialize_items,
    to_tower_buffer,
)
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.pixels import (
    StagingError,
    pil_to_hwc_array,
    tensor_to_chw,
)
from kimi_bench.domain.policy import Decision
from kimi_bench.domain.scheduler import (
    assign_owners,
    images_of_rank,
    needs_pre_embed_move,
)
from kimi_bench.pipeline.arena import Arena
from kimi_bench.pipeline.arena_layout import ArenaError, ArenaRef
from kimi_bench.pipeline.cache_steps import look_up, reuse, store
from kimi_bench.pipeline.decode import decode_input, stand_in
from kimi_bench.pipeline.feature_hash import hash_features
from kimi_bench.pipeline.gather import gather as gather  # the encoder-output gather step
from kimi_bench.pipeline.step import (
    CPU_STAND_IN,
    RankOutput,
    Step,
)
from kimi_bench.pipeline.transport import (
    ShmRef,
    broadcast_bytes,
    dumps,
    loads,
    tensor_from_shm,
    tensor_map_shm,
    tensor_to_shm,
)

# ---------------------------------------------------------------- producer (tokenizer worker)


def stage(step: Step, obj: Any, *, require_uint8: bool, where: str = "producer") -> torch.Tensor:
    """``to_chw_uint8``: a CHW view of the input on the host. PIL: convert + np.array copy
    (two host copies), then a permuted (non-contiguous) view. Tensor: validated as CHW.
    Encoded bytes are decoded first (``decode_input``). A GPU-decoded image comes to the
    host as the runtime's deferred path brings it: one D2H of the raw uint8 (0.5.23's
    cache path ``.cpu().contiguous()``; the PR's ``.cpu()`` before the carrier)."""
    if isinstance(obj, EncodedImage):
        obj = decode_input(step, obj.data, obj.header.format, where)
    if isinstance(obj, DeviceImage):
        mirrors = (
            "prepare_artifact_batch: .cpu().contiguous()"
            if step.profile.deferred_contiguous_at_producer
            else "_precompute_hashes_before_cpu_transfer: .cpu()"
        )
        return to_host(step, stage_on_device(step, obj, where), where, mirrors)
    if isinstance(obj, Image.Image):
        arr = pil_to_hwc_array(obj, step.cfg)
        nbytes = int(arr.nbytes)
        step.ledger.add(where, "convert", "pil", "pil", nbytes, "to_chw_uint8: convert")
        step.ledger.add(where, "to_numpy", "pil", "host", nbytes, "to_chw_uint8: np.array")
        return torch.from_numpy(arr).permute(2, 0, 1)
    if isinstance(obj, torch.Tensor):
        t = tensor_to_chw(obj.detach().cpu(), require_uint8=require_uint8, contiguous=False)
        if obj.dim() == 2 or (obj.dim() == 3 and obj.shape[0] == 1):
            step.ledger.add(
                "producer", "channel_repeat", "host", "host", tensor_bytes(t), "to_chw_uint8"
            )
        if t.shape[0] == 4 and step.cfg.transparent_bg is None:
            t = t[:3]
        return t
    raise StagingError(
        f"unsupported input type {type(obj).__name__}; expected a PIL image or a tensor"
    )


def stage_on_device(step: Step, img: DeviceImage, where: str) -> torch.Tensor:
    """``to_chw_uint8`` of a GPU-decoded image: it stays on the GPU (``.cuda()`` is a no-op
    there); one channel is repeated to three on the device."""
    t = img.tensor
    if t.shape[0] == 1:
        step.ledger.add(where, "channel_repeat", "device", "device", 3 * t.numel(), "to_chw_uint8")
        t = t.repeat(3, 1, 1)
    return t


def to_device(step: Step, t: torch.Tensor, stage_name: str, mirrors: str) -> torch.Tensor:
    """A host -> device copy, as ``.to(device, non_blocking=True)`` (strides kept). Without
    CUDA the device is emulated in host memory and a host copy stands in (ledger says so)."""
    if step.on_cuda:
        step.ledger.add(stage_name, "h2d", "host", "device", tensor_bytes(t), mirrors)
        return t.to(step.device, non_blocking=True)
    step.ledger.add(stage_name, "h2d", "host", "device", tensor_bytes(t), mirrors + CPU_STAND_IN)
    return t.clone()


def to_host(step: Step, t: torch.Tensor, stage_name: str, mirrors: str) -> torch.Tensor:
    """A device -> host copy (``.cpu()``, pageable); a host copy stands in without CUDA."""
    if step.on_cuda:
        step.ledger.add(stage_name, "d2h", "device", "host", tensor_bytes(t), mirrors)
        return t.cpu()
    step.ledger.add(stage_name, "d2h", "device", "host", tensor_bytes(t), mirrors + CPU_STAND_IN)
    return t.clone()


def _eager_on_device(step: Step, staged: list[Any], plans: list[ResizePlan]) -> list[torch.Tensor]:
    """GPU preprocess at the producer: per-image ``.to(device)`` (strides kept; none for a
    GPU-decoded image, already there), batch on the device, split on the device."""
    on_dev = [
        stage_on_device(step, t, "producer")
        if isinstance(t, DeviceImage)
        else to_device(step, t, "producer", "to_chw_uint8(device=cuda)")
        for t in staged
    ]
    return list(materialize(on_dev, plans, step.cfg, step.device).split())


def produce(
    step: Step, images: Sequence[Any], plans: Sequence[ResizePlan], decisions: Sequence[Decision]
) -> list[MMItem]:
    """The producer step: items in input order, deferred (uint8 + record), encoded
    (deferred-decode: the bytes + record, nothing decoded) or eager (FP32 patches on the
    host) per decision. With the runtime's preprocess cache a hit reuses its stored item
    (``pipeline.preprocess_cache``). Marks ``producer``, ``hash`` (the runtime's feature
    hash, ``pipeline.feature_hash``) and ``d2h`` (one ``.cpu()`` per device feature)."""
    keys, hits, repeats = look_up(step, images, decisions)
    todo = [i for i in range(len(images)) if i not in hits and i not in repeats]
    staged = {i: _staged(step, images[i], decisions[i]) for i in todo}
    eager = [i for i in todo if not decisions[i].defer]
    on_dev: dict[int, torch.Tensor] = {}
    if eager:
        done = _eager_on_device(step, [staged[i] for i in eager], [plans[i] for i in eager])
        on_dev = dict(zip(eager, done, strict=True))
    raw = [i for i in todo if decisions[i].defer and not decisions[i].encoded]
    raw_dev = {i: staged[i] for i in raw if isinstance(staged[i], DeviceImage)}
    raw_dev = {i: stage_on_device(step, d, "producer") for i, d in raw_dev.items()}
    on_host = {i: _deferred_feature(step, staged[i]) for i in raw if i not in raw_dev}
    step.hook.mark("producer")
    hash_features(step, on_dev | raw_dev, on_host)
    step.hook.mark("hash")
    feats = {i: to_host(step, f, "d2h", "per-item .cpu()") for i, f in on_dev.items()}
    feats |= on_host
    feats |= {i: to_host(step, f, "d2h", "_precompute_hashes_before_cpu_transfer: .cpu()")
              for i, f in raw_dev.items()}  # fmt: skip
    step.hook.mark("d2h")
    items: list[MMItem] = []
    for i, (plan, d) in enumerate(zip(plans, decisions, strict=True)):
        if i in hits or i in repeats:
            items.append(reuse(step, hits[i] if i in hits else items[repeats[i]], i in repeats))
            continue
        msd: dict[str, Any] = {GRID_KEY: grid_tensor(plan)}
        if d.defer:
            msd[DEFERRED_KEY] = make_deferred_record(plan, step.cfg)
        if d.encoded:
            msd[ENCODED_KEY] = FrozenRecord(encoded_record(images[i]))
            items.append(MMItem(encoded_feature(images[i]), msd))
        else:
            items.append(MMItem(feats[i], msd))
            store(step, keys[i], items[-1], d, images[i])
    return items


def _staged(step: Step, obj: Any, d: Decision) -> Any:
    """What the producer holds of one input before its features: nothing (it travels
    encoded), a GPU-decoded image kept on the device (eager; deferred when the runtime
    hashes it there before its ``.cpu()``, the PR era), or the host CHW view."""
    if d.encoded:
        return None
    keep = not d.defer or step.profile.feature_hash == "pad_value"
    if isinstance(obj, EncodedImage) and keep:
        obj = decode_input(step, obj.data, obj.header.format, "producer")
    if isinstance(obj, DeviceImage) and keep:
        return obj
    return stage(step, obj, require_uint8=d.defer)


def _deferred_feature(step: Step, view: torch.Tensor) -> torch.Tensor:
    if step.profile.deferred_contiguous_at_producer and not view.is_contiguous():
        step.ledger.add(
            "producer", "hwc_to_chw", "host", "host", tensor_bytes(view),
            "prepare_artifact_batch: .cpu().contiguous()",
        )  # fmt: skip
        return view.contiguous()
    return view


# ------------------------------------------------------------------------------ carriers


def wrap_shm(step: Step, items: list[MMItem], prefix: str) -> list[MMItem]:
    """Producer side of the ``shm`` carrier (``ShmPointerMMData``): ``.contiguous()`` when
    the feature is a permuted view (the HWC->CHW copy), then one copy into a new segment per
    CPU tensor feature; other features (an arena slot's ``ArenaRef``) pass as they are."""
    out = []
    for it in items:
        f: Any = it.feature
        if not isinstance(f, torch.Tensor):
            out.append(it)
            continue
        if not f.is_contiguous():
            step.ledger.add(
                "serialize", "hwc_to_chw", "host", "host", tensor_bytes(f),
                "ShmPointerMMData: .contiguous()",
            )  # fmt: skip
            f = f.contiguous()
        nbytes = tensor_bytes(f)
        step.ledger.add(
            "serialize", "shm_fallocate", "shm", "shm", nbytes, "ShmPointerMMData: posix_fallocate"
        )
        step.ledger.add("serialize", "shm_copy_in", "host", "shm", nbytes, "ShmPointerMMData")
        out.append(MMItem(tensor_to_shm(f, prefix), it.model_specific_data))  # type: ignore[arg-type]
    return out


def feature_bytes(item: MMItem) -> int:
    """Pixel bytes an item stands for (an ``ArenaRef`` or ``ShmRef`` counts its bytes)."""
    f: Any = item.feature
    return f.nbytes if isinstance(f, (ArenaRef, ShmRef)) else tensor_bytes(f)


def serialize(step: Step, obj: Any, stage_name: str, mirrors: str) -> bytes:
    blob = dumps(obj)
    step.ledger.add(stage_name, "pickle", "host", "host", len(blob), mirrors)
    return blob


def deserialize(step: Step, blob: bytes, stage_name: str, mirrors: str, count: int = 1) -> Any:
    obj = loads(blob)
    step.ledger.add(stage_name, "unpickle", "host", "host", len(blob), mirrors, count)
    return obj


def record_ipc(step: Step, nbytes: int, frames: int = 1) -> None:
    step.ledger.add("to_rank0", "ipc", "host", "host", nbytes, step.carrier.ipc_mirrors, frames)


def broadcast(step: Step, obj: Any, rank: int, world: int, group: Any = None) -> Any:
    """``broadcast_pyobj`` over gloo: rank 0 pickles and sends; every other rank copies the
    buffer into ``bytes`` and unpickles. Every rank returns the object."""
    if world == 1:
        return obj
    blob = serialize(step, obj, "broadcast", "broadcast_pyobj: pickle") if rank == 0 else None
    received = broadcast_bytes(blob, src=0, group=group)
    if rank == 0:
        step.ledger.add(
            "broadcast", "gloo_broadcast", "host", "wire", len(received) * (world - 1),
            "broadcast_pyobj: dist.broadcast", count=world - 1,
        )  # fmt: skip
        return obj
    step.ledger.add("broadcast", "bytes_copy", "host", "host", len(received), "broadcast_pyobj")
    return deserialize(step, received, "broadcast", "broadcast_pyobj: pickle.loads")


def take(step: Step, items: list[MMItem]) -> tuple[list[MMItem], list[str]]:
    """A rank takes its items out of shared memory: clone (PR era) or copy-on-write map
    (0.5.23). Returns the items and the segment names (rank 0 unlinks after a barrier)."""
    out, names = [], []
    for it in items:
        f: Any = it.feature
        if isinstance(f, ShmRef):
            if step.profile.receiver == "clone":
                step.ledger.add("take_copy", "clone", "shm", "host", f.nbytes, "unwrap_shm: clone")
                t = tensor_from_shm(f)
            else:
                step.ledger.add("take_copy", "map", "shm", "host", f.nbytes, "ACCESS_COPY map")
                t = tensor_map_shm(f)
            out.append(MMItem(t, it.model_specific_data))
            names.append(f.name)
        else:
            out.append(it)
    return out, names


# ---------------------------------------------------------------------------- rank step


def need_arena(step: Step) -> Arena:
    if step.arena is None:
        raise ArenaError("the zero-copy arm needs the run's arena (Step.arena is not set)")
    return step.arena


def arena_to_device(step: Step, ref: ArenaRef) -> torch.Tensor:
    """Owner only: one H2D copy of the image's bytes straight from its slot
    (``non_blocking``; DMA from page-locked memory when the arena is registered), then
    the CHW view on the device (HWC slots: permute and drop PIL's padding byte there, as
    the runtime's ``.to()`` of a permuted view does). Without CUDA a host copy stands in."""
    arena = need_arena(step)
    host = arena.view(ref)
    mirrors = "zero-copy: owner H2D from the arena"
    if step.on_cuda:
        mirrors += " (page-locked)" if arena.registered else " (not registered: pageable)"
    else:
        mirrors += CPU_STAND_IN
    step.ledger.add("owner_h2d", "h2d", "shm", "device", ref.nbytes, mirrors)
    if step.on_cuda:
        dev = host.to(step.device, non_blocking=True)
        arena.after_copy(step.device)
    else:
        dev = host.clone()
    return dev[:, :, : ref.channels].permute(2, 0, 1) if ref.layout == "hwc" else dev


def rank_step(
    step: Step,
    items: list[MMItem],
    rank: int,
    world: int,
    decode_errors: list[tuple[int, str]] | None = None,
) -> RankOutput:
    """Pre-embed move (as the whitelist decides for the arm's model class), owner
    assignment, owner-only H2D, materialize, cast into the BF16 tower buffer. Marks
    ``pre_embed_move``, ``owner_h2d``, ``owner_materialize``. deferred-decode: an owner
    decode that fails raises, or, given ``decode_errors``, is listed there (item index,
    reason) and a black image of the planned size stands in, so that every rank still
    reaches the collectives of the step (a server fails that request, not the batch)."""
    moved: set[int] = set()
    if needs_pre_embed_move(step.model_class):
        for i, it in enumerate(items):  # every rank moves every item, used or not
            it.feature = to_device(step, it.feature, "pre_embed_move", "_move_items_to_device")
            moved.add(i)
    step.hook.mark("pre_embed_move")
    owners = assign_owners([it.num_patches for it in items], world)
    mine = images_of_rank(owners, rank)
    decode_s = 0.0
    decoded: list[tuple[int, tuple[str, str]]] = []
    for i in mine:
        resident = False  # decoded on this rank's GPU: nothing to copy there
        if items[i].is_encoded:  # deferred-decode: the owner's one decode, then staging
            t0, n = time.perf_counter(), len(step.decodes)
            try:
                items[i], resident = owner_decode(step, items[i])
            except (StagingError, ContractError, OSError, SyntaxError) as exc:
                if decode_errors is None:
                    raise
                # the exception's type first: a server maps decode errors to HTTP 400
                decode_errors.append((i, f"{type(exc).__name__}: {exc}"))
                items[i] = stand_in(items[i])
            if step.on_cuda:  # a GPU decode is asynchronous: time it done (the H2D waits anyway)
                torch.cuda.synchronize(step.device)
            decode_s += time.perf_counter() - t0
            decoded += [(i, d) for d in step.decodes[n:]]
        f: Any = items[i].feature
        if isinstance(f, ArenaRef):  # zero-copy arm: straight from the arena
            items[i].feature = arena_to_device(step, f)
        elif i not in moved and not resident:
            what = "raw uint8" if items[i].is_deferred else "FP32 of an eager item"
            items[i].feature = to_device(step, items[i].feature, "owner_h2d", f"owner H2D {what}")
    step.hook.mark("owner_h2d")
    batch = tower = None
    if mine:
        batch = materialize_items([items[i] for i in mine], step.cfg, step.device)
        tower = to_tower_buffer(batch.split(), torch.bfloat16)
    step.hook.mark("owner_materialize")
    out = RankOutput(owners, mine, batch, tower, [it.num_patches for it in items])
    out.decode_ms, out.decoded = decode_s * 1e3, decoded
    return out


def owner_decode(step: Step, item: MMItem) -> tuple[MMItem, bool]:
    """deferred-decode (proposed): the owner decodes the encoded bytes with the runtime's
    decoder (``step.decoder``, on the owner's own device), checks the image is the one the
    header planned, and stages it: a PIL decode as the producer of the raw deferred arm
    would (``stage``), a GPU decode kept on the owner's GPU (``stage_on_device``). Returns
    the raw-uint8 deferred item and whether it is already on this rank's device."""
    f = item.feature if item.feature.device.type == "cpu" else item.feature.cpu()
    msd = dict(item.model_specific_data)
    header = msd.pop(ENCODED_KEY)
    im = decode_input(step, f.numpy().tobytes(), header["format"], "owner_h2d")
    try:
        check_decoded(im, header)
    except StagingError as exc:
        raise ContractError(f"deferred-decode: {exc}") from exc
    if isinstance(im, DeviceImage):
        return MMItem(stage_on_device(step, im, "owner_h2d"), msd), True
    return MMItem(stage(step, im, require_uint8=True, where="owner_h2d"), msd), False
