"""THE pipeline's sequence, written once: what the producer (tokenizer worker) does with a
request's images, the hops to the scheduler ranks, and what every rank does with what it
received. ``parity`` runs it in one process (ranks in turn, ``InTurn``), ``micro`` and
``serve-ab`` (spawned processes or torchrun, over HTTP too) in real processes joined with
gloo (``Gloo``); the engines around it keep only process plumbing: queues, pipes, gloo,
clocks, signals.

    producer_step   decide -> produce -> pack              (marks producer, d2h)
    send            serialize -> the hop to rank 0          (marks serialize)
    receive         rank 0 unpickles the request            (marks to_rank0)
    broadcast       broadcast_pyobj to every rank           (marks broadcast)
    scheduler_step  take -> rank step -> release -> [encoder] -> gather
                    (marks take_copy, pre_embed_move, owner_h2d, owner_materialize, gather)

Which step does what is the arm's and the carrier's (objects a process chooses once by
name, ``choose_once``, and makes its steps from, ``Chosen.step``); every step appends its
name to ``Step.trail``, so a run can show the sequence it ran (the reports' ``recipe``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.decoders import DecoderChoice, choose
from kimi_bench.domain.ledger import Ledger
from kimi_bench.domain.navit import ResizePlan, plan_resize
from kimi_bench.domain.policy import Decision, PolicyMode
from kimi_bench.domain.runtime import RuntimeProfile, get_profile
from kimi_bench.pipeline.arena import Arena
from kimi_bench.pipeline.arms import arm
from kimi_bench.pipeline.arms.zero_copy import held_slots, release_slots
from kimi_bench.pipeline.cache_steps import cached_decisions
from kimi_bench.pipeline.carriers import carrier
from kimi_bench.pipeline.gather import gather
from kimi_bench.pipeline.preprocess_cache import PreprocessCache
from kimi_bench.pipeline.step import ArmLike, CarrierLike, Hook, NoHook, RankOutput, Step
from kimi_bench.pipeline.steps import record_ipc
from kimi_bench.pipeline.transport import unlink


def recipe_record(producer: Sequence[str], rank: Sequence[str]) -> dict[str, list[str]]:
    """The steps a run went through, as reports keep them (``data.recipe``): the producer's
    and rank 0's trails, each step once, in the order first run."""
    return {"producer": list(dict.fromkeys(producer)), "rank": list(dict.fromkeys(rank))}


@dataclass(frozen=True)
class Chosen:
    """What a process chooses once, by name, for every step it makes: its arms, the
    carrier, the runtime profile and the decoder on its device (``choose_once``)."""

    arms: dict[str, ArmLike]
    carrier: CarrierLike
    profile: RuntimeProfile
    decoder: DecoderChoice
    # each runtime arm's producer cache (profile with the preprocess cache on), by arm name
    caches: dict[str, PreprocessCache] = field(default_factory=dict)

    def step(
        self,
        name: str,
        cfg: PreprocessConfig,
        device: torch.device,
        *,
        hook: Hook | None = None,
        arena: Arena | None = None,
        ledger: Ledger | None = None,
        baseline_whitelisted: bool = False,
    ) -> Step:
        """A step of the arm ``name`` in this process, with a new ledger unless given."""
        return Step(
            self.arms[name],
            self.carrier,
            cfg,
            device,
            self.profile,
            ledger if ledger is not None else Ledger(),
            hook if hook is not None else NoHook(),
            arena,
            self.decoder,
            baseline_whitelisted,
            cache=self.caches.get(name),
        )


def choose_once(
    arms: Sequence[str],
    carrier_: str,
    runtime: str | None,
    decoder: str,
    device: torch.device,
    *,
    tokenizer_workers: int = 1,
) -> Chosen:
    """The arms, carrier, runtime profile and decoder (``auto``: as the profile decodes on
    ``device``) a process makes its steps of, each chosen from its registry."""
    profile = get_profile(runtime)
    made: dict[str, ArmLike] = {n: arm(n) for n in arms}
    return Chosen(
        made,
        carrier(carrier_),
        profile,
        choose(decoder, profile, device),
        caches_for(made, profile),
    )


def caches_for(
    arms: Mapping[str, ArmLike], profile: RuntimeProfile, tokenizer_workers: int = 1
) -> dict[str, PreprocessCache]:
    """A preprocess cache per runtime arm (one producer's share of the budget, split
    across ``tokenizer_workers``) when the profile has the cache on; none otherwise or
    for a proposed arm."""
    if not profile.preprocess_cache:
        return {}
    return {
        n: PreprocessCache(profile.cache_bytes(tokenizer_workers), profile.preprocess_cache_entries)
        for n, a in arms.items()
        if not a.proposed
    }


def make_step(
    arm_: ArmLike | str,
    cfg: PreprocessConfig,
    device: torch.device,
    *,
    carrier_: CarrierLike | str | None = None,
    runtime: str | RuntimeProfile | None = None,
    hook: Hook | None = None,
    arena: Arena | None = None,
    ledger: Ledger | None = None,
    decoder: DecoderChoice | str = "auto",
    baseline_whitelisted: bool = False,
) -> Step:
    """A step of one arm in this process, its arm and carrier chosen by name (once);
    ``decoder``: this process's choice, or the name to choose on ``device`` (``auto``: as
    the runtime profile decodes there). A process that makes many steps chooses once
    (``choose_once``) and makes them with ``Chosen.step``. ``carrier_`` None: the one
    the profile runs in one process (``in_process_carrier``); ``runtime``: a profile's
    spec, or the profile itself."""
    profile = runtime if isinstance(runtime, RuntimeProfile) else get_profile(runtime)
    the_arm = arm(arm_) if isinstance(arm_, str) else arm_
    carrier_ = profile.in_process_carrier if carrier_ is None else carrier_
    chosen = Chosen(
        {the_arm.name: the_arm},
        carrier(carrier_) if isinstance(carrier_, str) else carrier_,
        profile,
        decoder if isinstance(decoder, DecoderChoice) else choose(decoder, profile, device),
        caches_for({the_arm.name: the_arm}, profile),
    )
    return chosen.step(
        the_arm.name, cfg, device, hook=hook, arena=arena, ledger=ledger,
        baseline_whitelisted=baseline_whitelisted,
    )  # fmt: skip


# ---------------------------------------------------------------- producer (tokenizer worker)


@dataclass
class Produced:
    """The producer's result: plans, decisions, the items, and what travels (``packed``)."""

    plans: list[ResizePlan]
    decisions: list[Decision]
    items: list[MMItem]
    packed: Any


def plans_of(step: Step, images: Sequence[Any]) -> list[ResizePlan]:
    """The NaViT plan of every image (from its size: a header does)."""
    return [plan_resize(im.width, im.height, step.cfg) for im in images]


def decide(
    step: Step,
    images: Sequence[Any],
    plans: Sequence[ResizePlan],
    *,
    scope: PolicyMode | None = None,
    owner_can_materialize: bool = True,
) -> list[Decision]:
    """The deferral decision of one request's images, as the arm makes it."""
    step.trail.append("decide")
    known = cached_decisions(images)  # a preprocess-cache hit keeps its artifact's decision
    rest = [i for i in range(len(images)) if i not in known]
    made = step.arm.decide(
        step, [images[i] for i in rest], [plans[i] for i in rest], scope=scope,
        owner_can_materialize=owner_can_materialize,
    ) if rest else []  # fmt: skip
    known |= dict(zip(rest, made, strict=True))
    return [known[i] for i in range(len(images))]


def producer_step(
    step: Step,
    images: Sequence[Any],
    prefix: str,
    *,
    plans: Sequence[ResizePlan] | None = None,
    decisions: Sequence[Decision] | None = None,
) -> Produced:
    """decide -> produce -> pack. ``decisions`` already made (parity decides per request
    of a corpus first) skip the decide step. Marks ``producer`` and ``d2h``."""
    plans_ = list(plans) if plans is not None else plans_of(step, images)
    made = list(decisions) if decisions is not None else decide(step, images, plans_)
    step.trail.append("produce")
    items = step.arm.produce(step, images, plans_, made)
    step.trail.append("pack")
    packed = step.arm.pack(step, items, prefix)
    return Produced(plans_, made, items, packed)


def send(step: Step, payload: Any, put: Callable[[Any], Any], *, ipc: bool = True) -> None:
    """The request encoded for the hop to scheduler rank 0 by the carrier (one pickle,
    ``send_pyobj``; vLLM: msgpack metadata and the tensors as out-of-band frames), each
    frame handed to ``put``; ``ipc``: the hop crosses processes (its bytes in the
    ledger). Marks ``serialize``."""
    step.trail.append("send")
    frames = step.carrier.encode(step, payload)
    step.hook.mark("serialize")
    for f in frames:
        put(f)
    if ipc:
        record_ipc(step, sum(memoryview(f).nbytes for f in frames), len(frames))


# ----------------------------------------------------------------------- scheduler ranks


@dataclass(frozen=True)
class Gloo:
    """Ranks in their own processes, joined by torch.distributed over gloo (``group``:
    None = the default group) and, with one GPU per rank, an NCCL ``device_group``."""

    size: int
    device_group: Any = None

    def barrier(self) -> None:
        dist.barrier()

    def broadcast(self, step: Step, obj: Any, rank: int) -> Any:
        return step.carrier.broadcast(step, obj, rank, self.size, None)

    def gather(self, step: Step, out: RankOutput, rank: int) -> torch.Tensor | None:
        return gather(step, out, rank, self.size, self.device_group)


@dataclass(frozen=True)
class InTurn:
    """Every rank in this process, one after the other (``parity``): rank 0 receives the
    request, every other rank decodes its own copy of the producer's frames (as after the
    broadcast); a carrier that broadcasts in turn (vLLM's ``MessageQueue``) runs its own
    broadcast through ``mailbox`` (rank 0 first). No barrier, no gather."""

    size: int
    frames: list[Any] = field(repr=False, default_factory=list)
    mailbox: list[Any] = field(repr=False, default_factory=list)

    def barrier(self) -> None:
        return None

    def broadcast(self, step: Step, obj: Any, rank: int) -> Any:
        if step.carrier.broadcasts_in_turn:
            return step.carrier.broadcast(step, obj, rank, self.size, self.mailbox)
        if rank == 0:
            return obj
        return step.carrier.decode(step, iter(self.frames).__next__, "broadcast", "loads")

    def gather(self, step: Step, out: RankOutput, rank: int) -> torch.Tensor | None:
        return None


Ranks = Gloo | InTurn


def receive(step: Step, get: Callable[[], Any]) -> Any:
    """Rank 0 takes the producer's request (``recv_pyobj``; the carrier takes as many
    frames from ``get`` as it sent). Marks ``to_rank0``."""
    step.trail.append("receive")
    obj = step.carrier.decode(step, get, "to_rank0", "recv_pyobj")
    step.hook.mark("to_rank0")
    return obj


def broadcast(step: Step, ranks: Ranks, obj: Any, rank: int) -> Any:
    """``broadcast_pyobj`` of rank 0's object to every rank. Marks ``broadcast``."""
    step.trail.append("broadcast")
    out = ranks.broadcast(step, obj, rank)
    step.hook.mark("broadcast")
    return out


@dataclass
class RankResult:
    """What a rank holds after the scheduler step: its ``RankOutput`` and, with a device
    group, every image's encoder output in input order (``gathered``)."""

    out: RankOutput
    gathered: torch.Tensor | None


def take(step: Step, ranks: Ranks, packed: Sequence[Any]) -> list[MMItem]:
    """Every request's items out of what the rank received (``packed``: one per request).
    Shared-memory segments: after a barrier every rank clones or maps its items (runtime
    profile); after a second barrier every rank unlinks (the first one wins, as 0.5.23).
    Marks ``take_copy``."""
    step.trail.append("take")
    segments = any(step.carrier.holds_segments(p) for p in packed)
    if segments:
        ranks.barrier()
    items: list[MMItem] = []
    names: list[str] = []
    for p in packed:
        got, segs = step.carrier.take(step, p)
        items += got
        names += segs
    if segments:
        ranks.barrier()  # every rank holds its copy or mapping before the names go
        unlink(names)
    step.hook.mark("take_copy")
    return items


def scheduler_step(
    step: Step,
    ranks: Ranks,
    packed: Sequence[Any],
    rank: int,
    *,
    encoder: Callable[[RankOutput], None] | None = None,
    decode_errors: list[tuple[int, str]] | None = None,
) -> RankResult:
    """take -> rank step (pre-embed move, owners, owner H2D, materialize, BF16 tower
    buffer) -> release the arena slots -> ``encoder`` (serve's stand-in) -> gather."""
    items = take(step, ranks, packed)
    held = held_slots(items)
    step.trail.append("rank_step")
    out = step.arm.rank_step(step, items, rank, ranks.size, decode_errors)
    step.trail.append("release")
    release_slots(step, held)
    if encoder is not None:
        encoder(out)
    step.trail.append("gather")
    return RankResult(out, ranks.gather(step, out, rank))
