"""``serve-ab`` through HTTP: the same seeded trace (arrivals, images, prompt) per rate sent
to each arm's OpenAI-compatible endpoint in turn by the streaming client
(``kimi_bench.serving.client``).

Arms are either external endpoints (``endpoints``: name -> base URL, e.g. two SGLang
servers) or, without endpoints, one ``kimi-bench serve`` emulator server per arm started
on loopback and stopped at the end. Each endpoint is probed once (``/v1/models``, version);
``/metrics`` is scraped after the warm-up requests and after each trace, and the deltas are
kept. Runs come back as ``bench.serve_runs.ServeRun`` (what the in-process path returns
too) with ``source`` (what served the arm) and ``server_metrics``; each request is a
``ServedRequest`` (client times, tokens, the images it carried, the server's facts)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from kimi_bench.bench.serve_arms import Arm, emulator_command, open_arms
from kimi_bench.bench.serve_profile import ServerProfiler
from kimi_bench.bench.serve_runs import (
    Placement,
    ServeFailed,
    ServeRun,
    from_client,
    request_images,
)
from kimi_bench.infra.limits import interrupt_reason, is_interrupt
from kimi_bench.options import (
    EMULATOR_MODEL,
    SERVE_AB_START_TIMEOUT_S,
    ServeCommandOptions,
    ServeOptions,
    parse_endpoint,
    rate_label,
)
from kimi_bench.serving.client import (
    BeforeSend,
    ClientOptions,
    auth_headers,
    drive,
)
from kimi_bench.serving.endpoints import flush_cache
from kimi_bench.serving.eos import COMMON
from kimi_bench.serving.file_server import serve_images
from kimi_bench.serving.ledger_metrics import copies_from_metrics
from kimi_bench.serving.metrics import MetricsScrapes, metrics_delta
from kimi_bench.serving.trace import Trace, arrival_offsets
from kimi_bench.serving.workload import Workload, build_workload
from kimi_bench.serving.workload.trace import workload_trace

__all__ = ["HttpServeOptions", "ServeFailed", "emulator_command", "run_serve_ab_http"]

# the capacity search: given the arms, probe(arm, rate, index) -> the run at that rate, and
# what to call once a probe is judged (the partial report)
Search = Callable[[list[Arm], Callable[[Arm, float, int], ServeRun], Callable[[], None]], None]
SETTLE_S = 0.3  # after a trace, before the /metrics scrape: the last step's copy counts land


@dataclass(frozen=True, kw_only=True)
class HttpServeOptions:
    """What serve-ab through HTTP needs, built from serve-ab's options (``from_options``;
    the field names are theirs). No defaults here: they are the options' only."""

    rates: tuple[float, ...]
    requests: int
    arms: tuple[str, ...]  # emulated arms, when no endpoints
    endpoints: tuple[tuple[str, str], ...]  # (name, base URL); replaces ``arms``
    workload: Workload  # what the requests carry (built before any server starts)
    replay_timestamps: bool  # the workload's own timestamps instead of the rate's arrivals
    image_transport: str  # base64 or url (a loopback file server for the run)
    burstiness: float
    warmup_requests: int
    repeats: int
    seed: int
    request_timeout_s: float
    # emulator servers (no endpoints): ``kimi-bench serve``'s own options, the same for
    # every arm but the arm and the port (``emulator_command``); they travel as the model
    emulator: ServeCommandOptions | None
    log_dir: Path | None  # server logs (None: a temporary folder)
    # client
    model: str | None  # None: the first model each endpoint lists
    max_tokens: int
    profile_server: bool  # --profile-server: /start_profile, /stop_profile around each trace
    max_concurrency: int | None
    api_key_env: str
    retry_429: int
    extra_body: dict[str, Any]  # --extra-body
    ignore_eos: bool  # as each arm's server spells it (serving.eos)
    headers: dict[str, str]  # --header K:V
    flush_cache: bool  # --flush-cache: /flush_cache before each measured trace (endpoints)
    before_send: BeforeSend | None  # awaited before each send (tests force late sends)

    @classmethod
    def from_options(
        cls,
        opts: ServeOptions,
        log_dir: Path | None,
        before_send: BeforeSend | None,
        workload: Workload | None = None,
    ) -> HttpServeOptions:
        """``opts`` (validated, machine defaults resolved: ``options.resolve_defaults``):
        the fields of the same name, and the rest made from them; ``workload`` built from
        ``opts`` when not given."""
        work = workload or build_workload(opts, opts.requests or 1)
        made: dict[str, Any] = {
            "requests": len(work.requests),
            "endpoints": tuple(parse_endpoint(e) for e in opts.endpoints),
            "emulator": None if opts.endpoints else _emulator_template(opts, work),
            "log_dir": log_dir,
            "before_send": before_send,
            "workload": work,
            "extra_body": dict(opts.extra_body),
            "headers": opts.header_map,
        }
        same = {f.name: getattr(opts, f.name) for f in fields(cls) if f.name not in made}
        return cls(**same, **made)  # a field ServeOptions lacks: AttributeError

    def client_options(self, model: str, eos_as: str | None = None) -> ClientOptions:
        """The client's options for one arm: ``eos_as`` is how its server takes
        ``--ignore-eos`` (``serving.eos``; None: the common field)."""
        base = ClientOptions.from_options(self, model)
        eos = (eos_as or COMMON) if self.ignore_eos else None  # per request: each its own max
        return replace(base, extra_body=dict(self.extra_body), ignore_eos_as=eos,
                       headers=self.headers)  # fmt: skip


def _emulator_template(opts: ServeOptions, work: Workload) -> ServeCommandOptions:
    """The emulator servers' options from serve-ab's: the pipeline's settings under their
    own names; the arena sized for the workload's requests (its largest width and height,
    its most images a request, a slot per request that can be in flight)."""
    w, h = work.max_size
    requests = (opts.requests or 1) + opts.warmup_requests + 1
    return ServeCommandOptions.model_validate(
        {
            "arm": opts.arms[0], "host": "127.0.0.1", "served_model_name": (EMULATOR_MODEL,),
            "preset": opts.preset, "config": Path(opts.config).resolve() if opts.config else None,
            "ranks": opts.ranks or 1, "processor_workers": opts.processor_workers,
            "transport": opts.transport, "runtime": opts.runtime, "device": opts.device,
            "preprocess_cache": opts.preprocess_cache, "vllm_arena": opts.vllm_arena,
            "encoder_tp_mode": opts.encoder_tp_mode,
            "standins": opts.standins, "start_timeout": SERVE_AB_START_TIMEOUT_S,
            "arena_image": f"{w}x{h}", "image_count": work.max_images,
            "arena_requests": max(2, min(requests, 512)), "fault_hooks": opts.fault_hooks,
            # profiled: measured requests (after start-up, the text-only probe, the warm-up)
            "profile": Path(opts.profile).resolve() if opts.profile else None,
            "profile_after": 2 + opts.warmup_requests,
        }
    )  # fmt: skip


def run_serve_ab_http(
    opts: HttpServeOptions,
    on_run: Callable[[list[ServeRun]], None] | None = None,
    search: Search | None = None,
) -> list[ServeRun]:
    """Every (rate, repeat, arm) through HTTP, or with ``search`` (the capacity search,
    ``serve_capacity``) the rates it asks for, arm by arm; ``on_run`` sees the runs after
    each. A dead endpoint ends its arm (the others go on); at the end, ServeFailed with the
    runs names every dead arm. Ctrl-C (or SIGTERM) ends at once with ServeFailed and the
    runs so far. Emulator servers and the image file server are stopped in every case."""
    runs: list[ServeRun] = []

    def notify() -> None:
        if on_run:
            on_run(runs)

    def probe(
        arm: Arm, rate: float, rep: int, index: int, urls: tuple[str, ...], judged: bool = False
    ) -> ServeRun:
        """One trace; ``judged``: the search calls ``notify`` once it has judged it."""
        offsets = _offsets(opts, rate, rep)
        trace = workload_trace(opts.workload, offsets, urls)
        res = _run_arm(arm, trace, Placement(rate, rate_label(rate), rep, index, offsets), opts)
        runs.append(res)
        arm.runs.append(res)
        if is_interrupt(res.error):
            notify()
            raise KeyboardInterrupt(res.error)
        if not judged:
            notify()
        return res

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_sigterm_as_interrupt())
            urls = _image_urls(opts, stack)
            arms = open_arms(opts, stack)
            if search is not None:
                search(arms, lambda arm, rate, index: probe(arm, rate, 0, index, urls, True),
                       notify)  # fmt: skip
            for i, rate in enumerate(opts.rates if search is None else ()):
                for rep in range(opts.repeats):
                    order = arms[::-1] if rep % 2 else arms  # A B, B A, A B, ...
                    for arm in (a for a in order if not a.dead):
                        probe(arm, rate, rep, i, urls)
        except KeyboardInterrupt as exc:
            raise ServeFailed(interrupt_reason(exc), runs) from None
    dead = [f"{a.name}: {a.dead}" for a in arms if a.dead]
    if dead:
        raise ServeFailed("; ".join(dead) + "; results are partial", runs)
    return runs


def _offsets(opts: HttpServeOptions, rate: float, rep: int) -> tuple[float, ...]:
    stamps = opts.workload.timestamps if opts.replay_timestamps else None
    if stamps is not None:
        return stamps
    return arrival_offsets(rate, opts.requests, opts.burstiness, opts.seed + 7919 * rep)


def _image_urls(opts: HttpServeOptions, stack: contextlib.ExitStack) -> tuple[str, ...]:
    """``--image-transport url``: the pool's URLs on a loopback file server that lasts
    the run; () for base64 data URLs."""
    if opts.image_transport != "url":
        return ()
    pool = opts.workload.pool
    return stack.enter_context(serve_images([p.data for p in pool], [p.mime for p in pool]))


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout) takes Ctrl-C's path while servers run (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")  # named as SIGTERM in the report

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


# ---------------------------------------------------------------------- runs


def _run_arm(arm: Arm, trace: Trace, at: Placement, opts: HttpServeOptions) -> ServeRun:
    client = opts.client_options(arm.model, arm.source.get("ignore_eos_as"))
    sizes = [(p.width, p.height, len(p.data)) for p in opts.workload.pool]
    gone = arm.gone()
    scrapes = MetricsScrapes(arm.url, auth_headers(opts.api_key_env))
    profiler = ServerProfiler(arm.url, opts.api_key_env) if opts.profile_server else None
    result = None
    if gone is None:

        def before_trace() -> None:
            if arm.server is not None or opts.flush_cache:  # emulators: always
                flushed = flush_cache(arm.url, {**auth_headers(opts.api_key_env), **opts.headers})
                arm.source.setdefault("cache_flushes", []).append(flushed)
            scrapes.take_before()
            if profiler is not None:
                profiler.start()

        result = drive(
            arm.url, trace, client, before_trace=before_trace, before_send=opts.before_send
        )
        if profiler is not None:
            profiler.stop()
            arm.source.setdefault("profile_server", []).append(profiler.outcome())
    if arm.server is not None:
        time.sleep(SETTLE_S)
    after = scrapes.scrape() if scrapes.before is not None else None
    out = ServeRun(arm=arm.name, at=at, error=gone, source=arm.source,
                   server_metrics_error=scrapes.error)  # fmt: skip
    if result is not None and result.trace_start is not None:
        t0 = result.trace_start
        limit = [trace.request_max_tokens(i) or opts.max_tokens for i in range(len(trace))]
        out.records = [
            from_client(
                r, t0, request_images([sizes[k] for k in trace.image_keys[r.rid]]), limit[r.rid]
            )
            for r in result.records
        ]
        out.trace_start = t0
    if result is not None:
        out.error, out.unsent = result.error, result.unsent
    if scrapes.before is not None and after is not None:
        out.server_metrics = metrics_delta(scrapes.before, after).to_dict()
        if arm.server is not None:
            out.copies = copies_from_metrics(scrapes.before, after)
    if not is_interrupt(out.error):
        arm.dead = out.error or arm.gone()
        if arm.dead and not out.error:
            out.error = arm.dead
    return out
