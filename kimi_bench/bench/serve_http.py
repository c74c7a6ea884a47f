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
import io
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from PIL import Image

from kimi_bench.bench.serve_profile import ServerProfiler
from kimi_bench.bench.serve_runs import Placement, ServeRun, from_client, request_images
from kimi_bench.engine.serve_job import encode_images
from kimi_bench.infra.limits import interrupt_reason, is_interrupt
from kimi_bench.options import (
    EMULATOR_MODEL,
    SERVE_AB_START_TIMEOUT_S,
    SERVE_FROM_OPTIONS,
    ServeCommandOptions,
    ServeOptions,
    parse_endpoint,
    rate_label,
)
from kimi_bench.pipeline.transport import cleanup_segments
from kimi_bench.serving.client import (
    BeforeSend,
    ClientOptions,
    auth_headers,
    drive,
    probe_server,
)
from kimi_bench.serving.endpoints import text_only_prompt_tokens
from kimi_bench.serving.launch import ServerProcess, ServerStartError, free_port, port_was_taken
from kimi_bench.serving.ledger_metrics import copies_from_metrics
from kimi_bench.serving.metrics import MetricsError, MetricsSnapshot, metrics_delta, scrape_metrics
from kimi_bench.serving.trace import DEFAULT_PROMPT, Trace, arrival_offsets, make_trace


class ServeFailed(RuntimeError):
    def __init__(self, message: str, runs: list[ServeRun]) -> None:
        super().__init__(message)
        self.runs = runs


SETTLE_S = 0.3  # after a trace, before the /metrics scrape: the last step's copy counts land


@dataclass(frozen=True, kw_only=True)
class HttpServeOptions:
    """What serve-ab through HTTP needs, built from serve-ab's options (``from_options``;
    the field names are theirs). No defaults here: they are the options' only."""

    rates: tuple[float, ...]
    requests: int
    arms: tuple[str, ...]  # emulated arms, when no endpoints
    endpoints: tuple[tuple[str, str], ...]  # (name, base URL); replaces ``arms``
    images_per_request: int
    resolution: tuple[int, int]
    image_format: str
    image_content: str
    unique_images: int
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
    before_send: BeforeSend | None  # awaited before each send (tests force late sends)

    @classmethod
    def from_options(
        cls, opts: ServeOptions, log_dir: Path | None, before_send: BeforeSend | None
    ) -> HttpServeOptions:
        """``opts`` (validated, machine defaults resolved: ``options.resolve_defaults``):
        the fields of the same name, and the rest made from them."""
        made: dict[str, Any] = {
            "requests": opts.requests or 1,
            "resolution": opts.width_height,
            "endpoints": tuple(parse_endpoint(e) for e in opts.endpoints),
            "emulator": None if opts.endpoints else _emulator_template(opts),
            "log_dir": log_dir,
            "before_send": before_send,
        }
        same = {f.name: getattr(opts, f.name) for f in fields(cls) if f.name not in made}
        return cls(**same, **made)  # a field ServeOptions lacks: AttributeError

    def client_options(self, model: str) -> ClientOptions:
        return ClientOptions.from_options(self, model)


def _emulator_template(opts: ServeOptions) -> ServeCommandOptions:
    """The emulator servers' options from serve-ab's: the pipeline's settings under their
    own names; the arena sized for serve-ab's requests (``--image-resolution`` images,
    ``--image-count`` a request, a slot per request that can be in flight)."""
    w, h = opts.width_height
    requests = (opts.requests or 1) + opts.warmup_requests + 1
    return ServeCommandOptions.model_validate(
        {
            "arm": opts.arms[0], "host": "127.0.0.1", "served_model_name": (EMULATOR_MODEL,),
            "preset": opts.preset, "config": Path(opts.config).resolve() if opts.config else None,
            "ranks": opts.ranks or 1, "processor_workers": opts.processor_workers,
            "transport": opts.transport, "runtime": opts.runtime, "device": opts.device,
            "standins": opts.standins, "start_timeout": SERVE_AB_START_TIMEOUT_S,
            "arena_image": f"{w}x{h}", "image_count": opts.images_per_request,
            "arena_requests": max(2, min(requests, 512)), "fault_hooks": opts.fault_hooks,
            # profiled: measured requests (after start-up, the text-only probe, the warm-up)
            "profile": Path(opts.profile).resolve() if opts.profile else None,
            "profile_after": 2 + opts.warmup_requests,
        }
    )  # fmt: skip


@dataclass
class _Arm:
    name: str
    url: str
    source: dict[str, Any]
    model: str = ""
    server: ServerProcess | None = None
    dead: str | None = None
    runs: list[ServeRun] = field(default_factory=list)


def run_serve_ab_http(
    opts: HttpServeOptions, on_run: Callable[[list[ServeRun]], None] | None = None
) -> list[ServeRun]:
    """Every (rate, repeat, arm) through HTTP; ``on_run`` sees the runs after each. A dead
    endpoint ends its arm (the others go on); at the end, ServeFailed with the runs names
    every dead arm. Ctrl-C (or SIGTERM) ends at once with ServeFailed and the runs so far.
    Emulator servers are stopped in every case."""
    mime = "image/png" if opts.image_format == "png" else "image/jpeg"
    pool = encode_images(
        opts.resolution, opts.unique_images, opts.image_content, opts.image_format, opts.seed
    )
    runs: list[ServeRun] = []
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_sigterm_as_interrupt())
            arms = _open_arms(opts, stack)
            for i, rate in enumerate(opts.rates):
                for rep in range(opts.repeats):
                    offsets = arrival_offsets(
                        rate, opts.requests, opts.burstiness, opts.seed + 7919 * rep
                    )
                    trace = make_trace(offsets, pool, opts.images_per_request, mime=mime)
                    order = arms[::-1] if rep % 2 else arms  # A B, B A, A B, ...
                    at = Placement(rate, rate_label(rate), rep, i, tuple(offsets))
                    for arm in (a for a in order if not a.dead):
                        res = _run_arm(arm, trace, at, opts)
                        runs.append(res)
                        arm.runs.append(res)
                        if on_run:
                            on_run(runs)
                        if is_interrupt(res.error):
                            raise KeyboardInterrupt(res.error)
        except KeyboardInterrupt as exc:
            raise ServeFailed(interrupt_reason(exc), runs) from None
    dead = [f"{a.name}: {a.dead}" for a in arms if a.dead]
    if dead:
        raise ServeFailed("; ".join(dead) + "; results are partial", runs)
    return runs


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


# ---------------------------------------------------------------------- arms


def _open_arms(opts: HttpServeOptions, stack: contextlib.ExitStack) -> list[_Arm]:
    """Start the emulator servers (side by side) or take the endpoints; probe each."""
    if opts.endpoints:
        arms = [_Arm(n, u.rstrip("/"), {"kind": "external", "url": u}) for n, u in opts.endpoints]
    else:
        logs = opts.log_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        logs.mkdir(parents=True, exist_ok=True)
        arms = [_spawn_emulator(name, opts, logs, stack) for name in opts.arms]
        arms = [_ready(arm, opts, logs, stack) for arm in arms]
    unreachable = []
    for arm in arms:
        info = probe_server(arm.url, api_key_env=opts.api_key_env)
        model = opts.model or info.model
        arm.source.update(
            model=model,
            server_version=info.version,
            version_source=info.version_source,
            server_header=info.server_header,
            probe_error=info.error,
        )
        if info.error and info.error.startswith("cannot reach"):
            unreachable.append(f"arm {arm.name}: {info.error}")
            # one of several endpoints: its requests fail (connect) and end the arm as
            # dead, so the report counts them; the other arms are measured
            arm.model = model or "unknown"
            continue
        if not model:
            raise ServeFailed(
                f"arm {arm.name}: {arm.url}/v1/models lists no model"
                + (f" ({info.error})" if info.error else "")
                + "; name one with --model",
                [],
            )
        arm.model = model
        arm.source["text_only_prompt_tokens"] = text_only_prompt_tokens(  # one request:
            arm.url, model, DEFAULT_PROMPT, api_key_env=opts.api_key_env,  # its deadline
            timeout_s=min(opts.request_timeout_s, 60.0),
        )  # fmt: skip
    if len(unreachable) == len(arms):  # nothing to measure: a typo, a server not up yet
        raise ServeFailed("; ".join(unreachable), [])
    return arms


def emulator_command(arm: str, port: int, opts: HttpServeOptions, folder: Path) -> list[str]:
    """The ``kimi-bench serve`` of one emulated arm: its options model written whole to
    ``folder/serve-<arm>.json`` and handed to the server process as that file."""
    assert opts.emulator is not None, "endpoints are not emulated"
    update: dict[str, object] = {"arm": arm, "port": port}
    if opts.emulator.profile is not None:  # each arm's traces in a folder of its own
        update["profile"] = opts.emulator.profile / arm
    model = opts.emulator.model_copy(update=update)
    path = folder / f"serve-{arm}.json"
    path.write_text(model.model_dump_json())
    return [sys.executable, "-m", "kimi_bench.cli.main", SERVE_FROM_OPTIONS, str(path)]


def _spawn_emulator(
    name: str, opts: HttpServeOptions, logs: Path, stack: contextlib.ExitStack
) -> _Arm:
    assert opts.emulator is not None, "endpoints are not emulated"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = emulator_command(name, port, opts, logs)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # this checkout's package, in the child
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    server = ServerProcess(
        argv,
        url,
        logs / f"server-{name}.log",
        start_timeout_s=opts.emulator.start_timeout,
        stop_timeout_s=40.0,
        env=env,
    )
    knobs = ("ranks", "processor_workers", "transport", "runtime", "device")
    emulator = {"arm": name, **{k: getattr(opts.emulator, k) for k in knobs}}
    emulator["log"] = str(server.log)
    arm = _Arm(name, url, {"kind": "emulated", "url": url, "emulator": emulator}, server=server)
    stack.callback(_stop_emulator, arm)
    server.spawn()
    return arm


def _ready(arm: _Arm, opts: HttpServeOptions, logs: Path, stack: contextlib.ExitStack) -> _Arm:
    """Wait for an emulator; one whose port another process took first starts again on
    another port (up to three tries)."""
    for tries_left in (2, 1, 0):
        assert arm.server is not None
        try:
            arm.server.wait_ready()
            return arm
        except ServerStartError as exc:
            if not (port_was_taken(exc) and tries_left):
                msg = f"the emulator server of arm {arm.name} did not start: {exc}"
                raise ServeFailed(msg, []) from None
        arm = _spawn_emulator(arm.name, opts, logs, stack)
    raise AssertionError("unreachable")


def _stop_emulator(arm: _Arm) -> None:
    """Stop the server; remove any segment its pipeline left (its own prefix only)."""
    assert arm.server is not None
    code = arm.server.stop()
    pid = arm.server.proc.pid if arm.server.proc else None
    left = cleanup_segments(f"kimibench_{pid}_") if pid else []
    arm.source["exit_code"] = code
    for run in arm.runs:
        run.leftover_segments = len(left)


def _server_gone(arm: _Arm) -> str | None:
    if arm.server is None or arm.server.proc is None or arm.server.proc.poll() is None:
        return None
    tail = arm.server.log.read_text(errors="replace").strip().splitlines()[-2:]
    return (
        f"the emulator server exited with code {arm.server.proc.returncode}"
        f" ({' | '.join(tail) or 'empty log'})"
    )


# ---------------------------------------------------------------------- runs


class _Scrapes:
    def __init__(self, url: str, api_key_env: str) -> None:
        self.url, self.headers = url, auth_headers(api_key_env)
        self.before: MetricsSnapshot | None = None
        self.error: str | None = None

    def scrape(self) -> MetricsSnapshot | None:
        try:
            return scrape_metrics(self.url, headers=self.headers)
        except MetricsError as exc:
            self.error = str(exc)
            return None

    def take_before(self) -> None:
        self.before = self.scrape()


def _run_arm(arm: _Arm, trace: Trace, at: Placement, opts: HttpServeOptions) -> ServeRun:
    gone = _server_gone(arm)
    scrapes = _Scrapes(arm.url, opts.api_key_env)
    client = opts.client_options(arm.model)
    sizes = _pool_sizes(trace)
    profiler = ServerProfiler(arm.url, opts.api_key_env) if opts.profile_server else None
    result = None
    if gone is None:

        def before_trace() -> None:
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
        out.records = [
            from_client(r, t0, request_images([sizes[k] for k in trace.image_keys[r.rid]]))
            for r in result.records
        ]
        out.trace_start = t0
    if result is not None:
        out.error, out.unsent = result.error, result.unsent
        out.warmup_failed = sum(not r.ok for r in result.warmup)
    if scrapes.before is not None and after is not None:
        out.server_metrics = metrics_delta(scrapes.before, after).to_dict()
        if arm.server is not None:
            out.copies = copies_from_metrics(scrapes.before, after)
    if not is_interrupt(out.error):
        arm.dead = out.error or _server_gone(arm)
        if arm.dead and not out.error:
            out.error = arm.dead
    return out


def _pool_sizes(trace: Trace) -> list[tuple[int, int, int]]:
    """(width, height, encoded bytes) of each image of the trace's pool (read from its
    header; an unreadable file counts no pixels)."""
    out = []
    for data in trace.images:
        try:
            with Image.open(io.BytesIO(data)) as img:
                w, h = img.size
        except Exception:
            w = h = 0
        out.append((w, h, len(data)))
    return out
