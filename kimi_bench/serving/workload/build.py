"""A workload as data: the encoded images a trace's requests carry (a pool, each image once)
and, per request, which pool images it carries, its prompt and output length, and, from a
recorded trace, its timestamp. Built once from serve-ab's options before any server
starts (:func:`build_workload`), the same request by request for every arm; its summary
(sizes, counts, bytes, formats, repeats) and its source go in the report.

Sources: a folder (``--images DIR``: its files in a seeded order), synthetic images
(``--image-sizes`` or ``--image-resolution``, ``--image-format``, ``--image-content``) or
a JSONL request file (``--requests-file``). Images per request follow
``--images-per-request`` (a count, a range or weights) except for a request file, whose
lines say. ``--repeat-share S``: that share of the image slots (never the first) repeats
an image of an earlier slot, picked uniformly (seeded); every other slot takes a fresh
image. Without it, ``--unique-images`` synthetic payloads (or the folder's files) are taken
in turn, so images repeat once the pool is used up."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kimi_bench.domain.repeats import repeat_sources
from kimi_bench.engine.images import make_image
from kimi_bench.options.workload_specs import (
    Choice,
    SizeDist,
    parse_contents,
    parse_counts,
    parse_formats,
    parse_sizes,
)
from kimi_bench.serving.workload.folder import Folder, scan_folder
from kimi_bench.serving.workload.from_file import file_workload
from kimi_bench.serving.workload.model import PoolImage, Workload, WorkRequest

if TYPE_CHECKING:  # options import this package's specs: no import at run time
    from kimi_bench.options import ServeOptions as WorkloadSettings

DEFAULT_PROMPT = "Describe the image."
_WORDS = [
    "the",
    "image",
    "shows",
    "a",
    "red",
    "house",
    "near",
    "river",
    "with",
    "two",
    "trees",
    "under",
    "blue",
    "sky",
    "and",
    "people",
]


def prompt_text(prompt: str | None, input_len: int | None, seed: int) -> str:
    """``--prompt``, or ``--input-len`` words (one text token each by the emulator's count),
    seeded; the default prompt otherwise."""
    if input_len is not None:
        rng = np.random.default_rng([seed, 31337])
        return " ".join(_WORDS[int(i)] for i in rng.integers(0, len(_WORDS), size=input_len))
    return DEFAULT_PROMPT if prompt is None else prompt


def encode(img: Any, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "png":
        img.save(buf, format="PNG")
    elif fmt == "webp":
        img.save(buf, format="WEBP", quality=85)
    else:
        img.save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def slot_plan(
    counts: Sequence[int], share: float | None, fresh_cycle: int, seed: int
) -> tuple[list[int], int]:
    """Which fresh image (0, 1, ...) each image slot takes, in slot order, and how many fresh
    images are needed. With ``share``: that share of slots (never the first) repeat the
    image of an earlier slot, chosen as every scenario chooses repeats
    (``domain.repeats.repeat_sources``, seeded); fresh images are then never reused.
    Without: fresh images are taken in turn, modulo ``fresh_cycle``."""
    total = sum(counts)
    if share is None:
        return [s % fresh_cycle for s in range(total)], min(total, fresh_cycle)
    fresh_of: dict[int, int] = {}
    out = [fresh_of.setdefault(src, len(fresh_of)) for src in repeat_sources(total, share, seed)]
    return out, len(fresh_of)


def _split(slots: list[int], counts: Sequence[int]) -> list[tuple[int, ...]]:
    out, at = [], 0
    for n in counts:
        out.append(tuple(slots[at : at + n]))
        at += n
    return out


def _counts(opts: WorkloadSettings, n: int, rng: np.random.Generator) -> list[int]:
    if opts.image_count_mix is None:
        return [opts.images_per_request] * n
    return [int(c) for c in parse_counts(opts.image_count_mix).draw(rng, n)]


def _folder_sizes(text: str) -> list[tuple[int, int]]:
    return [(i.width, i.height) for i in scan_folder(Path(text)).images]


def _synthetic(opts: WorkloadSettings, fresh: int, rng: np.random.Generator) -> list[PoolImage]:
    dist: SizeDist = (
        parse_sizes(opts.image_sizes, _folder_sizes)
        if opts.image_sizes
        else Choice((opts.width_height,), (1.0,))
    )
    sizes = dist.draw(rng, fresh)
    formats = parse_formats(opts.image_format).draw(rng, fresh)
    mix = parse_contents(opts.image_content)  # one content: no draw (earlier seeds' images)
    contents = mix.draw(rng, fresh) if len(mix.values) > 1 else [mix.values[0]] * fresh
    pixels = np.random.default_rng(opts.seed)  # the legacy pool's noise, at one size
    out = []
    for i, ((w, h), fmt, content) in enumerate(zip(sizes, formats, contents, strict=True)):
        img = make_image(w, h, content, pixels, i)
        out.append(PoolImage(encode(img, fmt), fmt, w, h, "generated", content))
    return out


def _from_folder(folder: Folder, fresh: int, rng: np.random.Generator) -> list[PoolImage]:
    order = rng.permutation(len(folder.images))
    picked = [folder.images[int(order[t % len(order)])] for t in range(fresh)]
    return [PoolImage(i.read(), i.format, i.width, i.height, str(i.path)) for i in picked]


def build_workload(opts: WorkloadSettings, requests: int) -> Workload:
    """The workload of ``requests`` requests; WorkloadError names what is wrong (a file, a
    line) before anything starts."""
    if opts.requests_file is not None:
        return file_workload(opts, requests, prompt_text)
    rng = np.random.default_rng([opts.seed, 4242])
    counts = _counts(opts, requests, rng)
    folder = scan_folder(opts.images) if opts.images is not None else None
    cycle = len(folder.images) if folder is not None else opts.unique_images
    slots, fresh = slot_plan(counts, opts.repeat_share, cycle, opts.seed)
    if folder is not None:
        pool = _from_folder(folder, fresh, rng)
        source = {"kind": "folder", "path": str(folder.root), "files": len(folder.images),
                  "hidden_skipped": folder.hidden_skipped}  # fmt: skip
    else:
        pool = _synthetic(opts, fresh, rng)
        source = {"kind": "synthetic", "sizes": opts.image_sizes or "x".join(
            map(str, opts.width_height)), "formats": opts.image_format,
            "content": opts.image_content}  # fmt: skip
    source.update(images_per_request=opts.image_count_mix or str(opts.images_per_request),
                  repeat_share=opts.repeat_share, seed=opts.seed)  # fmt: skip
    prompt = prompt_text(opts.prompt, opts.input_len, opts.seed)
    reqs = tuple(WorkRequest(keys, prompt) for keys in _split(slots, counts))
    return Workload(tuple(pool), reqs, source)
