"""A ``micro`` run's job (what its producer and every rank are given) and the images it
runs on: the round order, the real payload and the control payload, as decoded images or
encoded files, and the zero-copy arena they need."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.decoders import DecoderChoice
from kimi_bench.domain.encoded import EncodedImage, encode_jpeg
from kimi_bench.domain.repeats import with_repeats
from kimi_bench.engine.images import make_images
from kimi_bench.infra.fault_hooks import FaultHooks
from kimi_bench.pipeline import arms
from kimi_bench.pipeline.arena_layout import ArenaSpec, spec_for


@dataclass(frozen=True, kw_only=True)
class MicroJob:
    """Built from micro's options (``bench.micro_setup.micro_job``): no defaults here."""

    cfg: PreprocessConfig
    groups: tuple[tuple[int, int, int], ...]  # (count, width, height)
    content: str
    seed: int
    ranks: int
    transport: str
    device: str  # "cuda" or "cpu"
    repeats: int
    warmup: int
    prefix: str
    init_file: str
    arms: tuple[str, ...]
    runtime: str  # the runtime profile's spec (``+cache-off``: its preprocess cache off)
    repeat_share: float  # share of the request's images that repeat an earlier one (seeded)
    image_paths: tuple[str, ...]  # the user's images instead of generated ones (or none)
    hooks: FaultHooks  # tests: on_repeat / before_attach fail a process there (NO_FAULTS)
    ranks_per_node: int  # torchrun: LOCAL_WORLD_SIZE (rank -> local GPU); 0 = one host
    control_repeats: int  # rounds of every arm on the minimal payload (control plane)
    decoder: str  # --decoder: a decoder's name or auto (each process resolves it, per device)
    baseline_whitelisted: bool  # --eager-baseline deferral-off
    profile_dir: str | None  # --profile: traces of each process (None: off)
    profile_repeats: int  # rounds of every arm after the measured ones, under the profiler
    launch: int  # which of the run's process launches this job's processes are

    @property
    def iterations(self) -> int:
        return self.warmup + self.repeats

    def profiled(self, iteration: int, control: bool) -> bool:
        """A round after the measured ones, run under the profiler (not in the statistics)."""
        return not control and iteration >= self.iterations

    @property
    def control_warmup(self) -> int:
        """One unmeasured control round first when the arms warm up too."""
        return 1 if self.control_repeats and self.warmup else 0


def rounds(job: MicroJob) -> list[tuple[int, bool]]:
    """Every (iteration, control) round in run order, the same in every process; a round
    runs every arm. Control rounds (the minimal payload) are spread over the measured
    repeats, so drift on the host hits the arms and their control alike; the unmeasured
    control round runs first, the profiled rounds (``--profile``) last."""
    before: dict[int, list[int]] = {}
    for k in range(job.control_warmup + job.control_repeats):
        m = k - job.control_warmup
        at = 0 if m < 0 else job.warmup + (2 * m + 1) * job.repeats // (2 * job.control_repeats)
        before.setdefault(at, []).append(k)
    out = []
    for it in range(job.iterations):
        out += [(k, True) for k in before.get(it, [])]
        out.append((it, False))
    if job.profile_dir:
        out += [(job.iterations + k, False) for k in range(job.profile_repeats)]
    return out


def control_images(job: MicroJob) -> list[Any]:
    """The control payload: as many images as the run's, each one merged token (merge
    kernel x patch pixels a side, no padding), the least pixels a request carries."""
    side = job.cfg.merge_kernel_size * job.cfg.patch_size
    count = len(job.image_paths) or sum(c for c, _, _ in job.groups)
    return make_images(((count, side, side),), "random", job.seed)


def job_images(job: MicroJob) -> list[Any]:
    """The user's images (decoded once, as a tokenizer worker holds them) or generated."""
    from PIL import Image

    if job.image_paths:
        out = []
        for path in job.image_paths:
            with Image.open(path) as im:
                im.load()
                out.append(im.copy())
        return out
    return make_images(job.groups, job.content, job.seed)


def encoded_inputs(job: MicroJob, decoder: DecoderChoice | None = None) -> bool:
    """Every arm gets the inputs encoded (and decodes them in its producer stage, as the
    runtime's processor does) when an arm of the run takes encoded inputs
    (deferred-decode) or the decoder decodes on the GPU (the runtime's JPEG decode on
    CUDA); otherwise every arm gets the images decoded once, as before the run."""
    on_device = decoder is not None and decoder.chosen.on_device
    return on_device or any(a.encoded_inputs for a in arms(job.arms))


def job_inputs(job: MicroJob, decoder: DecoderChoice | None = None) -> list[Any]:
    """What the producer receives. With the deferred-decode arm (proposed) every arm gets
    the images *encoded* (the files' bytes, or generated images as JPEG q85, as serve-ab's
    requests carry them), so every other arm decodes at its producer, inside the timed
    producer stage, and deferred-decode only on the owner. Otherwise ``job_images``."""
    if not encoded_inputs(job, decoder):
        return with_repeats(job_images(job), job.repeat_share, job.seed)
    if job.image_paths:
        datas = [Path(p).read_bytes() for p in job.image_paths]
    else:
        datas = [encode_jpeg(im) for im in make_images(job.groups, job.content, job.seed)]
    return with_repeats([EncodedImage(d) for d in datas], job.repeat_share, job.seed)


def control_inputs(job: MicroJob, decoder: DecoderChoice | None = None) -> list[Any]:
    """The control payload, encoded (JPEG q85) when the run has the deferred-decode arm,
    as its real payload is."""
    images = with_repeats(control_images(job), job.repeat_share, job.seed)
    if not encoded_inputs(job, decoder):
        return images
    return [EncodedImage(encode_jpeg(im)) for im in images]


def arena_spec(job: MicroJob) -> ArenaSpec | None:
    """The zero-copy arm's arena: two slots of one request each (None without the arm)."""
    if not any(a.needs_arena for a in arms(job.arms)):
        return None
    if job.image_paths:
        from PIL import Image

        sizes = []
        for path in job.image_paths:
            with Image.open(path) as im:  # the header only
                sizes.append(im.size)
    else:
        sizes = [(w, h) for count, w, h in job.groups for _ in range(count)]
    return spec_for(sizes, job.ranks, requests=2)
