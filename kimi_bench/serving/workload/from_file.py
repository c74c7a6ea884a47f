"""A workload from a JSONL request file (``workload.jsonl``): its requests in file order
(under ``--replay-timestamps``, in their timestamps' order), cycled (or cut) to the asked
count; identical images (the same bytes) are one pool entry, so a trace's repeated images
are counted as repeats."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from kimi_bench.serving.workload.jsonl import FileImage, read_requests
from kimi_bench.serving.workload.model import PoolImage, Workload, WorkRequest

if TYPE_CHECKING:
    from kimi_bench.options import ServeOptions


def file_workload(
    opts: ServeOptions, requests: int, prompt_text: Callable[[str | None, int | None, int], str]
) -> Workload:
    """``prompt_text`` makes ``--prompt`` / ``--input-len`` text (``build.prompt_text``)."""
    assert opts.requests_file is not None
    lines = read_requests(opts.requests_file)
    if opts.replay_timestamps:  # a recorded trace is replayed once, never cycled, and in
        requests = min(requests, len(lines))  # the order of its timestamps: request i is
        lines.sort(key=lambda r: r.timestamp_s or 0.0)  # sent at the i-th (stable sort)
    pool: list[PoolImage] = []
    index: dict[bytes, int] = {}

    def key(img: FileImage) -> int:
        digest = hashlib.sha256(img.data).digest()
        if digest not in index:
            index[digest] = len(pool)
            pool.append(PoolImage(img.data, img.format, img.width, img.height, img.origin))
        return index[digest]

    given = opts.prompt is not None or opts.input_len is not None
    prompt = prompt_text(opts.prompt, opts.input_len, opts.seed) if given else None
    reqs = []
    for i in range(requests):
        line = lines[i % len(lines)]
        reqs.append(WorkRequest(tuple(key(img) for img in line.images), prompt or line.prompt,
                                line.max_tokens, line.timestamp_s))  # fmt: skip
    source = {"kind": "requests-file", "path": str(opts.requests_file), "lines": len(lines),
              "cycled": requests > len(lines), "seed": opts.seed}  # fmt: skip
    return Workload(tuple(pool), tuple(reqs), source)
