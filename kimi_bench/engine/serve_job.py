"""A serving pipeline's jobs: ``PipelineJob``, what every process of one arm's pipeline is
given (producers and ranks, for serve-ab's in-process runs and for ``kimi-bench serve``'s
emulator alike), and ``LoadJob``, what serve-ab's in-process load generator sends (the
trace and its request images). The emulator's pipeline is fed by HTTP requests and has no
load job. Neither holds a default or a placeholder."""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.repeats import repeat_sources
from kimi_bench.engine.images import make_images
from kimi_bench.engine.standins import StandinCost
from kimi_bench.infra.fault_hooks import FaultHooks
from kimi_bench.pipeline import arm
from kimi_bench.pipeline.arena_layout import ArenaSpec, spec_for


@dataclass(frozen=True, kw_only=True)
class PipelineJob:
    """One arm's serving pipeline: built from serve-ab's options (``bench.launch_runs``) or
    ``kimi-bench serve``'s (``serving.emulator.pipeline_job``)."""

    cfg: PreprocessConfig
    arm: str
    ranks: int
    workers: int  # producer (tokenizer worker) processes
    transport: str
    device: str
    runtime: str
    cost: StandinCost
    hooks: FaultHooks  # tests: on_request kills or wedges a producer there (NO_FAULTS)
    prefix: str
    init_file: str
    ranks_per_node: int  # torchrun: LOCAL_WORLD_SIZE (rank -> local GPU); 0 = one host
    decoder: str  # --decoder: a decoder's name or auto (each process resolves it, per device)
    baseline_whitelisted: bool  # --eager-baseline deferral-off
    # zero-copy arm: arena slots hold requests of ``image_count`` images of ``arena_image``
    arena_image: tuple[int, int]
    image_count: int
    arena_requests: int
    # --profile: torch profiler traces of each process into this folder (None: off), for
    # ``profile_requests`` requests after the first ``profile_skip`` request ids
    profile_dir: str | None
    profile_requests: int
    profile_skip: int


@dataclass(frozen=True, kw_only=True)
class LoadJob:
    """serve-ab's load generator: the arrival trace, the warm-up requests before it, the
    deadline without progress after which the ranks stop, and the request images."""

    arrivals: tuple[float, ...]
    warmup_requests: int
    request_timeout_s: float
    resolution: tuple[int, int]
    images_per_request: int
    image_format: str
    image_content: str
    unique_images: int
    seed: int
    # share of the trace's images that repeat an earlier one (seeded); None: the payloads
    # in turn (each payload's bytes are one image, so every cycle repeats them)
    repeat_share: float | None

    @property
    def total(self) -> int:
        return self.warmup_requests + len(self.arrivals)

    def slots(self, rid: int) -> list[tuple[int, int | None]]:
        """Request ``rid``'s images: (payload index, image identity) each. With a repeat
        share every image of the trace is distinct (the payloads cycle, the identities do
        not) except the repeats, which carry the payload and identity of the image they
        repeat; without one the payloads in turn, identified by their bytes (None)."""
        n = self.images_per_request
        if self.repeat_share is None:
            return [((rid * n + k) % self.unique_images, None) for k in range(n)]
        idents = _identities(self.total * n, self.repeat_share, self.seed)
        return [(idents[j] % self.unique_images, idents[j]) for j in range(rid * n, rid * n + n)]


@functools.cache
def _identities(count: int, share: float, seed: int) -> tuple[int, ...]:
    return tuple(repeat_sources(count, share, seed))


def encode_images(
    resolution: tuple[int, int], count: int, content: str, image_format: str, seed: int
) -> list[bytes]:
    """``count`` generated images as JPEG (quality 85) or PNG files."""
    w, h = resolution
    out = []
    for img in make_images(((count, w, h),), content, seed):
        buf = io.BytesIO()
        if image_format == "png":
            img.save(buf, format="PNG")
        else:
            img.save(buf, format="JPEG", quality=85)
        out.append(buf.getvalue())
    return out


def arena_spec(job: PipelineJob) -> ArenaSpec | None:
    """The arena of an arm that needs one: ``arena_requests`` slots of ``image_count``
    images of ``arena_image``, shared by the producers (None for other arms)."""
    if not arm(job.arm).needs_arena:
        return None
    sizes = [job.arena_image] * job.image_count
    return spec_for(sizes, job.ranks, requests=job.arena_requests, writers=job.workers)


def make_payloads(load: LoadJob) -> list[bytes]:
    """Encoded request images, identical for every arm at a given seed."""
    return encode_images(
        load.resolution, load.unique_images, load.image_content, load.image_format, load.seed
    )
