"""Who starts which process, where the ranks rendezvous, and which GPU each rank uses.

Two launchers:

- ``spawn`` (default): kimi-bench starts every process itself on one host: producer(s),
  load generator and all ranks; the ranks join over a file rendezvous.
- ``torchrun``: ``torchrun`` starts one kimi-bench process per rank on every node (env://
  rendezvous: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ...). Global rank 0
  also hosts the producer(s) and the load generator and writes the report; every other
  rank runs its scheduler loop in its own process and exits 0. The carrier across nodes is
  ``pickle`` (the runtime's default off one node); ``shm`` only within one node.

Ranks map to GPUs one to one when the host has enough GPUs (rank -> local rank -> GPU),
round robin otherwise. When every rank has a GPU of its own, a NCCL group is created next
to the gloo group and the encoder-output gather moves real tensors over it
(``kimi_bench.pipeline.gather``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, get_args

from kimi_bench.options import Launcher

_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
ENV_PREFIX = "env://"


class LaunchError(ValueError):
    """The launch cannot work as asked (a usage error): the message says why."""


@dataclass(frozen=True)
class World:
    """This process's place in the run."""

    launcher: Literal["spawn", "torchrun"] = "spawn"  # what "auto" resolved to
    rank: int = 0  # global rank of this process (spawn: the parent, which hosts everything)
    size: int = 1  # ranks in the run (torchrun: WORLD_SIZE)
    local_rank: int = 0
    local_size: int = 1  # ranks per node (torchrun: LOCAL_WORLD_SIZE)
    node_rank: int = 0
    nodes: int = 1
    run_id: str = ""

    @property
    def spans_nodes(self) -> bool:
        return self.nodes > 1

    @property
    def writes_report(self) -> bool:
        return self.rank == 0

    @property
    def ranks_per_node(self) -> int:
        """For ``rank_device``: 0 = every rank on this host (spawn)."""
        return self.local_size if self.launcher == "torchrun" else 0


def torchrun_detected(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return "TORCHELASTIC_RUN_ID" in env or all(k in env for k in _TORCHRUN_ENV)


def detect_world(launcher: str = "auto", env: Mapping[str, str] | None = None) -> World:
    """``auto``: torchrun when its environment is present, else spawn."""
    env = os.environ if env is None else env
    if launcher not in get_args(Launcher):
        choices = ", ".join(get_args(Launcher))
        raise LaunchError(f"--launcher must be one of {choices}, got {launcher!r}")
    if launcher == "spawn" or (launcher == "auto" and not torchrun_detected(env)):
        return World()
    missing = [k for k in _TORCHRUN_ENV if not env.get(k)]
    if missing:
        raise LaunchError(
            f"--launcher torchrun: {', '.join(missing)} not set; start kimi-bench with "
            "torchrun on every node (see docs/multi-gpu.md)"
        )
    try:
        size, local_size = int(env["WORLD_SIZE"]), int(env.get("LOCAL_WORLD_SIZE", "0"))
        world = World(
            launcher="torchrun",
            rank=int(env["RANK"]),
            size=size,
            local_rank=int(env["LOCAL_RANK"]),
            local_size=local_size or size,
            node_rank=int(env.get("GROUP_RANK", "0")),
            nodes=int(env.get("GROUP_WORLD_SIZE", "0")) or -(-size // (local_size or size)),
            run_id=f"{env.get('TORCHELASTIC_RUN_ID', 'none')}."
            f"{env.get('TORCHELASTIC_RESTART_COUNT', '0')}",
        )
    except ValueError:
        raise LaunchError("torchrun environment: RANK/WORLD_SIZE/... are not integers") from None
    return world


# --------------------------------------------------------------- GPUs and the mapping


def rank_gpu(rank: int, gpus: int, ranks_per_node: int = 0) -> int:
    """The GPU index of a rank on its host: its local rank, modulo the host's GPUs."""
    local = rank % ranks_per_node if ranks_per_node else rank
    return local % max(1, gpus)


class RankMapping(TypedDict):
    """``describe_mapping``: how ranks map to devices, the gather it implies, in words."""

    mapping: str  # one-to-one, round-robin or cpu
    gpus_per_host: int
    ranks: int
    devices: list[str]
    gather: str  # nccl, metadata or none
    text: str


def describe_mapping(device: str, ranks: int, gpus: int, ranks_per_node: int = 0) -> RankMapping:
    """How ranks map to devices (for the report's config/environment): ``one-to-one``,
    ``round-robin`` (several ranks share a GPU) or ``cpu``; the gather it implies."""
    per_host = ranks_per_node or ranks
    if device != "cuda" or gpus < 1:
        mapping, gather = "cpu", "metadata"
        text = f"{ranks} rank(s) on the CPU; the encoder-output gather carries metadata only"
    elif gpus >= per_host:
        mapping, gather = "one-to-one", "nccl" if ranks > 1 else "none"
        text = (
            f"{ranks} rank(s), one GPU each ({per_host} per host of {gpus} GPU(s)); the "
            "encoder-output gather moves BF16 tensors over NCCL"
        )
    else:
        mapping, gather = "round-robin", "metadata"
        text = (
            f"{per_host} rank(s) per host share {gpus} GPU(s) round robin; their device "
            "copies contend for the same PCIe link and the gather carries metadata only"
        )
    devices = [
        "cpu" if mapping == "cpu" else f"cuda:{rank_gpu(r, gpus, ranks_per_node)}"
        for r in range(ranks)
    ]
    return {
        "mapping": mapping,
        "gpus_per_host": gpus,
        "ranks": ranks,
        "devices": devices,
        "gather": gather,
        "text": text,
    }


class LaunchConfig(TypedDict):
    """A report's ``config.launch``: how the processes were started."""

    launcher: str
    nodes: int
    ranks_per_node: int
    rank_mapping: RankMapping


def describe_launch(
    world: World, ranks: int, device: str, transport: str
) -> tuple[LaunchConfig, list[str]]:
    """The launch for the report's config (launcher, nodes and the rank -> device mapping,
    ``describe_mapping``) and what the report says about it: the mapping and,
    under torchrun, the nodes and the carrier."""
    import torch

    gpus = torch.cuda.device_count() if device == "cuda" else 0
    config: LaunchConfig = {
        "launcher": world.launcher,
        "nodes": world.nodes,
        "ranks_per_node": world.local_size if world.launcher == "torchrun" else ranks,
        "rank_mapping": describe_mapping(device, ranks, gpus, world.ranks_per_node),
    }
    notes = [f"rank -> device: {config['rank_mapping']['text']}."]
    if world.launcher == "torchrun":
        notes.append(
            f"launched by torchrun: {ranks} ranks on {world.nodes} node(s), {world.local_size} "
            f"per node; global rank 0 hosts the producer(s) and the load generator; carrier "
            f"{transport}; the stage marks of ranks on other nodes are moved onto rank 0's "
            "clock (ping-pong offset, error below half the best round trip)."
        )
    return config, notes


# --------------------------------------------------------------------------- rendezvous


def join_gloo(init: str, rank: int, world: int, timeout_s: float = 300.0) -> None:
    """Join the run's gloo group: file rendezvous, or torchrun's store (env://) under a key
    of its own."""
    import torch.distributed as dist

    timeout = dt.timedelta(seconds=timeout_s)
    if not init.startswith(ENV_PREFIX):
        dist.init_process_group(
            "gloo", init_method=f"file://{init}", rank=rank, world_size=world, timeout=timeout
        )
        return
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    try:
        store = dist.TCPStore(
            host, port, world, is_master=rank == 0 and not agent_store, timeout=timeout,
            multi_tenant=True,
        )  # fmt: skip
    except (RuntimeError, OSError) as exc:
        raise ConnectionError(
            f"rank {rank}: cannot reach the torchrun store at {host}:{port}: {exc}"
        ) from None
    prefixed = dist.PrefixStore(init[len(ENV_PREFIX) :], store)
    dist.init_process_group("gloo", store=prefixed, rank=rank, world_size=world, timeout=timeout)


def device_group(device: Any, world: int) -> Any:
    """A NCCL group over all ranks when every rank has a CUDA device of its own (checked
    over gloo with the devices' UUIDs), else None. Collective: every rank calls it."""
    import torch
    import torch.distributed as dist

    if world < 2:
        return None
    ident: str | None = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        ident = str(getattr(props, "uuid", "")) or f"{socket.gethostname()}:{device.index}"
    idents: list[Any] = [None] * world
    dist.all_gather_object(idents, ident)
    if any(i is None for i in idents) or len(set(idents)) < world:
        return None
    group = dist.new_group(backend="nccl")
    # NCCL sets its communicator up on the first collective: do it here, not in a timed stage
    dist.all_reduce(torch.zeros(1, device=device), group=group)
    torch.cuda.synchronize(device)
    return group


def rank_device(kind: str, rank: int, ranks_per_node: int = 0) -> Any:
    """On CUDA runs the rank's local rank modulo the host's GPUs (one to one when there are
    enough, round robin otherwise; ``rank_gpu``), else the CPU."""
    import torch

    if kind != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", rank_gpu(rank, torch.cuda.device_count(), ranks_per_node))


@contextlib.contextmanager
def gloo_rank(init_file: str, rank: int, world: int, device: Any) -> Iterator[Any]:
    """Join the gloo group of a run (file rendezvous, or torchrun's env:// store) on
    ``device``; yields the NCCL device group when every rank has a GPU of its own, else
    None (``device_group``); leave on exit."""
    import torch
    import torch.distributed as dist

    if device.type == "cuda":
        torch.cuda.set_device(device)
    join_gloo(init_file, rank, world)
    try:
        yield device_group(device, world)
    finally:
        dist.destroy_process_group()


def clock_offset(rank: int, world: int, rounds: int = 8) -> float:
    """Seconds to add to this process's ``time.perf_counter`` to read rank 0's clock, for
    ranks on other nodes (each host has its own monotonic clock): ping-pong with rank 0
    over the gloo group, the offset of the round with the shortest round trip (error below
    half of it). Collective: every rank calls it; rank 0 gets 0."""
    import torch
    import torch.distributed as dist

    best_rtt, offset = math.inf, 0.0
    buf = torch.zeros(1, dtype=torch.float64)
    for peer in range(1, world):
        for _ in range(rounds):
            if rank == peer:
                t1 = time.perf_counter()
                dist.send(buf, dst=0)
                dist.recv(buf, src=0)
                t3 = time.perf_counter()
                if t3 - t1 < best_rtt:
                    best_rtt, offset = t3 - t1, float(buf.item()) - (t1 + t3) / 2
            elif rank == 0:
                dist.recv(buf, src=peer)
                buf.fill_(time.perf_counter())
                dist.send(buf, dst=peer)
    return offset
