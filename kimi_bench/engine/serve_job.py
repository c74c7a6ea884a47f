"""A ``serve-ab`` pipeline's job (what every process of one arm's run is given) and the
request images it serves, shared by the load generator, producers and ranks
(``serve_workers``), the HTTP client (``bench.serve_http``) and the serving emulator."""

from __future__ import annotations

import io
from dataclasses import dataclass

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.engine.images import make_images
from kimi_bench.engine.standins import StandinCost
from kimi_bench.infra.fault_hooks import FaultHooks
from kimi_bench.pipeline import arm
from kimi_bench.pipeline.arena_layout import ArenaSpec, spec_for


@dataclass(frozen=True, kw_only=True)
class ServeJob:
    """Built from serve-ab's options (``bench.launch_runs``) or the emulator's
    (``serving.emulator``): no defaults here."""

    cfg: PreprocessConfig
    arm: str
    ranks: int
    workers: int
    transport: str
    device: str
    resolution: tuple[int, int]
    images_per_request: int
    image_format: str
    image_content: str
    unique_images: int
    seed: int
    arrivals: tuple[float, ...]
    warmup_requests: int
    cost: StandinCost
    prefix: str
    init_file: str
    request_timeout_s: float  # the load generator's: a rank with no progress for this long stops
    runtime: str
    hooks: FaultHooks  # tests: on_request kills or wedges a producer there (NO_FAULTS)
    ranks_per_node: int  # torchrun: LOCAL_WORLD_SIZE (rank -> local GPU); 0 = one host
    # "loadgen": the load generator sends ``arrivals``; "queue": a serving backend
    # (``kimi_bench.serving.emulator``) puts requests with their encoded images on the
    # queue and the pipeline runs until it sets the stop event (``serve_rank_main``)
    source: str
    arena_requests: int  # zero-copy slots (0: one per request of the trace)

    @property
    def total(self) -> int:
        return self.warmup_requests + len(self.arrivals)


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


def arena_spec(job: ServeJob) -> ArenaSpec | None:
    """The zero-copy arm's arena: a slot per request that can be in flight (every request
    of the run, within the default budget), shared by the producers (None for other arms)."""
    if not arm(job.arm).needs_arena:
        return None
    sizes = [job.resolution] * job.images_per_request
    requests = job.arena_requests or job.total
    return spec_for(sizes, job.ranks, requests=requests, writers=job.workers)


def make_payloads(job: ServeJob) -> list[bytes]:
    """Encoded request images, identical for both arms at a given seed."""
    return encode_images(
        job.resolution, job.unique_images, job.image_content, job.image_format, job.seed
    )
