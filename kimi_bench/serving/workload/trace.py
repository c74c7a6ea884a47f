"""A workload as the client's :class:`~kimi_bench.serving.trace.Trace`: its pool, each
request's images, prompt and max tokens, at the given arrival offsets."""

from __future__ import annotations

from collections.abc import Sequence

from kimi_bench.serving.trace import Trace
from kimi_bench.serving.workload.build import Workload


def workload_trace(work: Workload, arrivals: Sequence[float], urls: Sequence[str] = ()) -> Trace:
    """Request ``i`` of the trace is the workload's request ``i`` sent at ``arrivals[i]``;
    ``urls`` (one per pool image) replace the data URLs (``--image-transport url``)."""
    reqs = work.requests[: len(arrivals)]
    if len(reqs) != len(arrivals):
        raise ValueError(f"{len(arrivals)} arrivals but {len(work.requests)} workload requests")
    return Trace(
        arrivals=tuple(float(a) for a in arrivals),
        images=tuple(p.data for p in work.pool),
        image_keys=tuple(r.keys for r in reqs),
        mimes=tuple(p.mime for p in work.pool),
        urls=tuple(urls),
        prompts=tuple(r.prompt for r in reqs),
        max_tokens=tuple(r.max_tokens for r in reqs),
    )
