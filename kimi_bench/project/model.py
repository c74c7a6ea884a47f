"""The projection model: each stage of each arm at N ranks from the costs a micro report
measured at its own rank count.

Every stage belongs to one kind, decided by the operations it runs (the copy ledger, or the
stage name in older reports):

- ``fixed``: work done once per request in one process (producer staging and preprocess,
  D2H, pickling, the pipe to rank 0, the owner's kernels). Bytes do not change with ranks,
  so neither does the time.
- ``threaded``: torch host copies (copy into shared memory, clone out of it). Each rank
  copies its own bytes in parallel with the others, so bytes per process do not change;
  what changes is how many torch threads each process gets: micro splits the host's cores
  between the producer and the ranks of a node (``cores // (ranks per node + 1)``), and a
  copy with T threads takes ``T ** -thread_exponent`` as long as with one. The stage's
  fixed latency (barriers; the intercept of ms against bytes across arms) does not scale.
- ``tree``: gloo's broadcast of the pickled request. gloo broadcasts CPU tensors along a
  binomial tree (``gloo/broadcast.cc``): ceil(log2 N) rounds; in round i every rank below
  2**i sends the whole message to rank + 2**i. Within a node the concurrent transfers of a
  round share the host's copy bandwidth: a round with k transfers on a node runs at
  ``max(1, k / loopback_streams)`` times a single transfer (a transfer to another node
  loads each end with half a transfer). Between nodes a round also waits for the NIC:
  bytes leaving (or entering) a node / ``link_gbps``. Rank 0's
  pickling and the receivers' unpickling are per process and do not change.
- ``link``: host-to-device copies (``pre_embed_move``: every rank moves every item;
  ``owner_h2d``: each owner its own images). Time = per-rank bytes at the rank's pageable
  copy rate (measured) + the bytes crossing the busiest GPU link at the pinned link rate
  (the report's floor). Ranks that share a GPU share its link; ranks on their own GPUs
  do not.
- ``allgather``: the encoder-output gather, when the report times it: ring all-gather,
  time scales with (N - 1) / N of the gathered bytes; between nodes at ``link_gbps``.

The total is anchored on the measured one: predicted total = measured total + the sum of
the stage changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kimi_bench.domain.scheduler import assign_owners
from kimi_bench.project.calibration import ArmCal, Calibration, StageCal
from kimi_bench.project.probe import CopyProbe

# A single gloo transfer between two local ranks (SPEC section 8: 77 MB in 18.5 ms on an
# H200 host); used only when the calibration report cannot give its own estimate.
DEFAULT_LOOPBACK_GBPS = 4.1
KINDS = ("fixed", "threaded", "tree", "link", "allgather")
_THREADED_OPS = ("shm_copy_in", "clone", "hwc_to_chw")


@dataclass(frozen=True)
class Host:
    """Host constants the calibration run cannot measure at one rank count."""

    cores: int | None = None  # CPU cores per node; None: thread split not modelled
    thread_exponent: float = 0.65
    loopback_streams: float = 1.7
    link_gbps: float = 100.0  # between nodes, Gbit/s
    loopback_gbps: float | None = None  # one gloo transfer, GB/s; None: from calibration
    probe: CopyProbe | None = None  # measured copy scaling; None or not covering: exponent


@dataclass(frozen=True)
class Topology:
    """Where N ranks run: ``ranks_per_node`` on each node (rank r on node r // that),
    ``gpus_per_node`` GPUs per node (0: CPU run); ranks map to a node's GPUs round robin."""

    ranks: int
    ranks_per_node: int
    gpus_per_node: int

    @property
    def nodes(self) -> int:
        return math.ceil(self.ranks / self.ranks_per_node)

    def node_of(self, rank: int) -> int:
        return rank // self.ranks_per_node

    def gpu_of(self, rank: int) -> int:
        return (rank % self.ranks_per_node) % max(1, self.gpus_per_node)

    def threads(self, cores: int | None) -> int | None:
        """micro's torch threads per process on node 0 (the producer plus its ranks)."""
        if cores is None:
            return None
        return max(1, cores // (min(self.ranks, self.ranks_per_node) + 1))


def calibration_topology(cal: Calibration) -> Topology:
    """micro runs every rank on one host, sharing its GPUs round robin."""
    return Topology(cal.ranks, cal.ranks, cal.gpus)


@dataclass(frozen=True)
class StagePrediction:
    stage: str
    kind: str
    measured_ms: float | None  # at the calibration's rank count
    ms: float | None


@dataclass(frozen=True)
class ArmPrediction:
    arm: str
    topology: Topology
    stages: dict[str, StagePrediction]
    total_ms: float


@dataclass
class Fitted:
    """What the model derived from the calibration (stated in the report)."""

    loopback_gbps: float
    loopback_source: str
    intercepts_ms: dict[str, float] = field(default_factory=dict)  # threaded and link stages
    pageable_ms_per_byte: dict[str, float] = field(default_factory=dict)  # "arm/stage"

    @property
    def pageable_gbps(self) -> dict[str, float]:
        return {k: 1e-6 / v for k, v in self.pageable_ms_per_byte.items() if v > 0}


def stage_kind(stage: StageCal) -> str:
    ops = stage.ops
    if "gloo_broadcast" in ops or stage.name == "broadcast":
        return "tree"
    if stage.name == "gather" or any("gather" in o for o in ops):
        return "allgather"
    if "h2d" in ops and stage.name != "producer":
        return "link"
    if stage.op_bytes(*_THREADED_OPS) > 0:
        return "threaded"
    return "fixed"


def tree_rounds(ranks: int) -> list[list[tuple[int, int]]]:
    """gloo's binomial broadcast from rank 0: the (sender, receiver) pairs of each round."""
    rounds = []
    for i in range(math.ceil(math.log2(ranks)) if ranks > 1 else 0):
        step = 1 << i
        rounds.append([(v, v + step) for v in range(step) if v + step < ranks])
    return rounds


def tree_ms(topo: Topology, payload: int, host: Host, loopback_gbps: float) -> float:
    """Milliseconds of gloo's tree for one message of ``payload`` bytes."""
    single = payload / (loopback_gbps * 1e9) * 1e3
    total = 0.0
    for pairs in tree_rounds(topo.ranks):
        load: dict[int, float] = {}  # host copy streams per node (a loopback transfer
        out: dict[int, int] = {}  # copies on both ends: 1; one end of a remote one: 0.5)
        inn: dict[int, int] = {}
        for src, dst in pairs:
            a, b = topo.node_of(src), topo.node_of(dst)
            if a == b:
                load[a] = load.get(a, 0.0) + 1.0
                continue
            load[a] = load.get(a, 0.0) + 0.5
            load[b] = load.get(b, 0.0) + 0.5
            out[a] = out.get(a, 0) + payload
            inn[b] = inn.get(b, 0) + payload
        host_ms = single * max(1.0, max(load.values()) / host.loopback_streams)
        wire = max([*out.values(), *inn.values(), 0])
        nic_ms = wire * 8 / (host.link_gbps * 1e9) * 1e3
        total += max(host_ms, nic_ms)
    return total


def _intercept(cal: Calibration, stage: str) -> float:
    """Fixed latency of a stage: intercept of ms against bytes over the arms where it ran
    with different byte counts, clamped to [0, smallest ms]; 0 with fewer points."""
    pts = [
        (float(a.stages[stage].bytes), a.stages[stage].ms)
        for a in cal.arms.values()
        if stage in a.stages and a.stages[stage].ms is not None and a.stages[stage].bytes > 0
    ]
    xs = {x for x, _ in pts}
    if len(xs) < 2:
        return 0.0
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(float(y or 0.0) for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    slope = sum((x - mx) * (float(y or 0.0) - my) for x, y in pts) / sxx
    return min(max(0.0, my - slope * mx), min(float(y or 0.0) for _, y in pts))


def _payload(stage: StageCal, ranks: int) -> int:
    b, c = stage.ops.get("gloo_broadcast", (stage.bytes, max(1, ranks - 1)))
    return b // max(1, c)


def estimate_loopback(cal: Calibration, host: Host) -> tuple[float, str]:
    """GB/s of one gloo transfer. With an inline carrier (pickle) the broadcast stage is rank 0's
    pickling (the same work as the producer's ``serialize``) + the transfer + a receiver's
    unpickling (the same work as rank 0's in ``to_rank0``); what remains after removing
    them, regressed on the payload over the arms, is the transfer's per-byte cost."""
    if host.loopback_gbps:
        return host.loopback_gbps, "given"
    pts = []
    for arm in cal.arms.values():
        b, s, t = (arm.stage_ms(x) for x in ("broadcast", "serialize", "to_rank0"))
        if not cal.uses_segments and cal.ranks > 1 and None not in (b, s, t):
            pts.append((_payload(arm.stages["broadcast"], cal.ranks), b - s - t))  # type: ignore[operator]
    if len(pts) >= 2 and pts[0][0] != pts[1][0]:
        (x0, y0), (x1, y1) = sorted(pts)[:1] + sorted(pts)[-1:]
        slope_ms_per_byte = (y1 - y0) / (x1 - x0)
        if slope_ms_per_byte > 0:
            return 1e-6 / slope_ms_per_byte, "calibration (broadcast - serialize - to_rank0)"
    return DEFAULT_LOOPBACK_GBPS, "default (SPEC section 8, 2 local ranks)"


def _owner_bytes(total: int, areas: tuple[int, ...], topo: Topology) -> tuple[int, int]:
    """(largest bytes one owner moves, largest bytes over one GPU link) for owner H2D."""
    if not areas:
        return total, total
    per_image = [total * a / sum(areas) for a in areas]
    owners = assign_owners(list(areas), topo.ranks)
    per_rank: dict[int, float] = {}
    for img, r in enumerate(owners):
        per_rank[r] = per_rank.get(r, 0.0) + per_image[img]
    per_gpu: dict[tuple[int, int], float] = {}
    for r, b in per_rank.items():
        key = (topo.node_of(r), topo.gpu_of(r))
        per_gpu[key] = per_gpu.get(key, 0.0) + b
    return int(max(per_rank.values())), int(max(per_gpu.values()))


def _link_bytes(stage: StageCal, cal: Calibration, topo: Topology) -> tuple[int, int]:
    """(bytes one rank copies, bytes over the busiest GPU link) of a link stage."""
    moved = stage.op_bytes("h2d") or stage.bytes
    if stage.name.startswith("owner"):
        return _owner_bytes(moved, cal.image_areas, topo)
    per_rank = moved // cal.ranks  # every rank moves every item
    ranks_here = min(topo.ranks, topo.ranks_per_node)
    per_gpu = math.ceil(ranks_here / max(1, topo.gpus_per_node))
    return per_rank, per_rank * per_gpu


def _pageable_ms_per_byte(stage: StageCal, cal: Calibration, intercept: float) -> float | None:
    """ms per byte of one rank's pageable copy: the stage minus its fixed latency and
    minus the link time of the bytes that crossed the busiest GPU link, per rank byte."""
    if stage.ms is None or cal.gpus == 0:
        return None
    link = (cal.h2d_gbps or math.inf) * 1e9 / 1e3  # bytes per ms
    per_rank, per_gpu = _link_bytes(stage, cal, calibration_topology(cal))
    if not per_rank:
        return None
    return max(0.0, stage.ms - intercept - per_gpu / link) / per_rank


def _predict_link(
    arm: str, stage: StageCal, cal: Calibration, topo: Topology, fit: Fitted
) -> float | None:
    rate = fit.pageable_ms_per_byte.get(f"{arm}/{stage.name}")
    if stage.ms is None or topo.gpus_per_node == 0 or rate is None:
        return stage.ms
    link = (cal.h2d_gbps or math.inf) * 1e9 / 1e3
    per_rank, per_gpu = _link_bytes(stage, cal, topo)
    return fit.intercepts_ms.get(stage.name, 0.0) + per_rank * rate + per_gpu / link


def _predict_stage(
    arm: str, stage: StageCal, cal: Calibration, topo: Topology, host: Host, fit: Fitted
) -> StagePrediction:
    kind = stage_kind(stage)
    ms: float | None = stage.ms
    if ms is not None and kind == "threaded":
        ms = _predict_threaded(stage, ms, cal, topo, host, fit)
    elif ms is not None and kind == "tree":
        payload = _payload(stage, cal.ranks)
        before = tree_ms(calibration_topology(cal), payload, host, fit.loopback_gbps)
        ms = max(0.0, ms + tree_ms(topo, payload, host, fit.loopback_gbps) - before)
    elif kind == "link":
        ms = _predict_link(arm, stage, cal, topo, fit)
    elif ms is not None and kind == "allgather":
        ms = _predict_allgather(stage, ms, cal, topo, host)
    return StagePrediction(stage.name, kind, stage.ms, ms)


def _predict_threaded(
    stage: StageCal, ms: float, cal: Calibration, topo: Topology, host: Host, fit: Fitted
) -> float:
    """With a host probe covering both rank counts: the measured change of each copy op
    for the bytes the stage moves (the rest of the stage stays). Otherwise the copies'
    part (the stage minus its fixed latency) scales by threads ** -thread_exponent."""
    r0, r1 = cal.ranks, min(topo.ranks, topo.ranks_per_node)
    if host.probe is not None and host.probe.covers(host.cores, r0, r1):
        copies = {o: v for o, v in stage.ops.items() if o in _THREADED_OPS}
        return max(0.0, ms + host.probe.change_ms(stage.name, copies, r0, r1))
    t0, t1 = calibration_topology(cal).threads(host.cores), topo.threads(host.cores)
    factor = (t0 / t1) ** host.thread_exponent if t0 and t1 else 1.0
    a = fit.intercepts_ms.get(stage.name, 0.0)
    return a + (ms - a) * factor


def _ring(n: int) -> float:
    return (n - 1) / n if n > 1 else 0.0


def _predict_allgather(
    stage: StageCal, ms: float, cal: Calibration, topo: Topology, host: Host
) -> float:
    base = _ring(cal.ranks)
    scaled = ms * _ring(topo.ranks) / base if base else ms
    if topo.nodes > 1:
        scaled += stage.bytes * _ring(topo.ranks) * 8 / (host.link_gbps * 1e9) * 1e3
    return scaled


def fit(cal: Calibration, host: Host) -> Fitted:
    """Everything the model derives from the calibration report, once."""
    gbps, source = estimate_loopback(cal, host)
    out = Fitted(gbps, source)
    scaled = {
        s
        for a in cal.arms.values()
        for s, st in a.stages.items()
        if stage_kind(st) in ("threaded", "link")
    }
    out.intercepts_ms = {s: _intercept(cal, s) for s in sorted(scaled)}
    for a in cal.arms.values():
        for s, st in a.stages.items():
            if stage_kind(st) != "link":
                continue
            rate = _pageable_ms_per_byte(st, cal, out.intercepts_ms.get(s, 0.0))
            if rate is not None:
                out.pageable_ms_per_byte[f"{a.name}/{s}"] = rate
    return out


def predict_arm(
    arm: ArmCal, cal: Calibration, topo: Topology, host: Host, fitted: Fitted
) -> ArmPrediction:
    stages = {
        s: _predict_stage(arm.name, st, cal, topo, host, fitted) for s, st in arm.stages.items()
    }
    change = sum(
        p.ms - p.measured_ms
        for p in stages.values()
        if p.ms is not None and p.measured_ms is not None
    )
    return ArmPrediction(arm.name, topo, stages, arm.total_ms + change)
