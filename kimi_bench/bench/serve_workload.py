"""serve-ab's workload step, between the options and the run: the request count a
``--requests-file`` implies, the workload built (every bad input refused here, before any
server starts) and the options fitted to it (``--replay-timestamps``: one rate, the trace's
own mean rate)."""

from __future__ import annotations

from kimi_bench.options import ServeOptions
from kimi_bench.options.workload_specs import parse_contents
from kimi_bench.serving.workload import Workload, WorkloadError, build_workload


def custom_workload(opts: ServeOptions) -> list[str]:
    """The workload options that only the HTTP path serves (not torchrun's in-process load
    generator), as flags. ``--repeat-share`` is served by both (the in-process generator
    repeats its payloads at the same seeded share)."""
    given = {
        "--images": opts.images is not None,
        "--image-sizes": opts.image_sizes is not None,
        "--images-per-request RANGE": opts.image_count_mix is not None,
        "--requests-file": opts.requests_file is not None,
        "--image-format MIX": opts.image_format not in ("jpeg", "png"),
        "--image-content MIX": len(parse_contents(opts.image_content).values) > 1,
        "--image-transport url": opts.image_transport != "base64",
        "--prompt": opts.prompt is not None,
        "--input-len": opts.input_len is not None,
    }
    return [flag for flag, on in given.items() if on]


def requests_from_file(opts: ServeOptions) -> ServeOptions:
    """With ``--requests-file`` and no ``--num-prompts``: one request per line of the file
    (its non-blank lines; the file is read whole, and checked, by the workload)."""
    if opts.requests_file is None or opts.requests is not None:
        return opts
    try:
        text = opts.requests_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{opts.requests_file}: cannot read the request file: {exc}") from None
    lines = sum(1 for line in text.splitlines() if line.strip())
    return opts.model_copy(update={"requests": max(1, lines)})


def prepare_workload(opts: ServeOptions) -> tuple[ServeOptions, Workload]:
    """The workload of ``opts`` (machine defaults resolved) and the options fitted to it."""
    work = build_workload(opts, opts.requests or 1)
    update: dict[str, object] = {"requests": len(work.requests)}
    if opts.replay_timestamps:
        stamps = work.timestamps
        if stamps is None:
            raise WorkloadError(f"{opts.requests_file}: --replay-timestamps needs a timestamp "
                                "on every line")  # fmt: skip
        span = stamps[-1] - stamps[0]
        rate = (len(stamps) - 1) / span if span > 0 else float("inf")
        update["rates"] = (rate,)
    return opts.model_copy(update=update), work
