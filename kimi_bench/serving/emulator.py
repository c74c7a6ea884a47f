"""The real backend of ``kimi-bench serve``: the emulated serving pipeline of serve-ab
(``engine/serve_workers.py``: producers that decode the images and run the arm's producer
step, gloo scheduler ranks with continuous batching, encoder and prefill stand-ins) fed
by HTTP requests instead of the load generator.

A request's encoded images go on the pipeline's request queue; a producer decodes them
(PIL) and runs the pipeline; rank 0 reports the request when its first token is ready,
and ``submit`` returns then. Every rank reports the copy ledger of each step, which the
backend adds to Prometheus counters (bytes and operations per ledger entry, bytes per
stage). Start-up sends one small request through the whole pipeline, so ``/health``
answers 200 only once every process works."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from PIL import Image

from kimi_bench.domain.config import PreprocessConfig, resolve_config
from kimi_bench.domain.ledger import CopyRow
from kimi_bench.domain.runtime import get_profile
from kimi_bench.engine.procs import Harness, WorkerFailed
from kimi_bench.engine.serve_job import PipelineJob
from kimi_bench.engine.serve_producer import producer_main
from kimi_bench.engine.serve_records import REPORTED, STAGES, STAMPS, PipelineRequest, TokensMessage
from kimi_bench.engine.serve_workers import serve_rank_main
from kimi_bench.engine.standins import StandinCost
from kimi_bench.infra.environment import resolve_device
from kimi_bench.infra.fault_hooks import FaultHooks, load_hooks
from kimi_bench.options import ServeCommandOptions
from kimi_bench.pipeline import arm
from kimi_bench.pipeline.transport import new_prefix
from kimi_bench.serving.backend import BackendError, FirstToken
from kimi_bench.serving.ledger_metrics import LedgerMetrics
from kimi_bench.serving.server_metrics import ServerMetrics

_DECODE_ERRORS = ("UnidentifiedImageError", "OSError", "DecompressionBombError", "SyntaxError")


@dataclass(frozen=True)
class EmulatorConfig:
    """``kimi-bench serve``'s options (``opts``, validated by the options model, which
    holds every default) with what they name resolved once: the preprocessing config, the
    device and the fault hooks. The pipeline's job is made from it (``job``)."""

    opts: ServeCommandOptions
    cfg: PreprocessConfig
    device: str  # resolved: cpu or cuda
    hooks: FaultHooks  # tests: the pipeline's and every answer's fault hooks (NO_FAULTS)

    @classmethod
    def from_options(cls, opts: ServeCommandOptions) -> EmulatorConfig:
        """ValueError when ``--config`` cannot be read (ConfigError) or ``--device cuda``
        finds no CUDA device."""
        return cls(
            opts, resolve_config(opts.preset, opts.config), resolve_device(opts.device).type,
            load_hooks(opts.fault_hooks),
        )  # fmt: skip

    @property
    def arm(self) -> str:
        return self.opts.arm

    @property
    def start_timeout_s(self) -> float:
        return self.opts.start_timeout

    def job(self, prefix: str, init_file: str) -> PipelineJob:
        """The pipeline's job, each setting under the option's own name."""
        o = self.opts
        return PipelineJob(
            cfg=self.cfg, arm=o.arm, ranks=o.ranks, workers=o.processor_workers,
            transport=o.transport, device=self.device, runtime=o.runtime_spec,
            cost=StandinCost.from_options(o.standins), hooks=self.hooks, prefix=prefix,
            init_file=init_file, ranks_per_node=0,  # one host
            decoder=o.decoder, baseline_whitelisted=o.eager_baseline == "deferral-off",
            arena_image=o.arena_size, image_count=o.image_count, arena_requests=o.arena_requests,
            profile_dir=str(o.profile) if o.profile else None,
            profile_requests=o.profile_requests, profile_skip=o.profile_after,
        )  # fmt: skip


def _probe_image() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (90, 160, 30)).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def _harness(prefix: str) -> Harness:
    """A Harness made off the main thread, so it installs no SIGTERM handler: the server
    (uvicorn, or ``serve_emulator`` during start-up) owns the process's signals."""
    made: list[Harness] = []
    t = threading.Thread(target=lambda: made.append(Harness(prefix=prefix)))
    t.start()
    t.join()
    return made[0]


class EmulatorBackend:
    """The pipeline processes of one arm behind the :class:`Backend` protocol.

    ``metrics`` (the server's) gains the pipeline's copy counters; ``on_dead(message)``
    runs once when the pipeline fails (a worker died or raised): requests in flight and
    later ones then fail with HTTP 503 naming the cause."""

    def __init__(
        self,
        conf: EmulatorConfig,
        metrics: ServerMetrics | None = None,
        on_dead: Callable[[str], None] | None = None,
    ) -> None:
        self.conf, self.metrics, self.on_dead = conf, metrics, on_dead
        self.prefix = new_prefix()  # this server's shared-memory segments start with it
        self.dead: str | None = None
        self.start_error: str | None = None
        self.leftover_segments: list[str] = []
        self._ids = itertools.count()  # request ids; 0 is the start-up request
        self._cache_epoch = 0  # raised by flush_cache; every request carries it
        self._pending: dict[int, asyncio.Future[PipelineRequest]] = {}
        self._decoding: dict[int, asyncio.Queue[float]] = {}  # request id -> its tokens' times
        self._loop: asyncio.AbstractEventLoop | None = None
        self._harness: Harness | None = None
        self._reader: threading.Thread | None = None
        self._stopping = False
        self._req_q: Any = None
        self._stop_evt: Any = None
        self._ledger = LedgerMetrics(metrics) if metrics is not None else None

    # ------------------------------------------------------------------ life cycle

    def launch(self) -> None:
        """Start the processes and serve one request through them, blocking (call it
        before the server starts, so Ctrl-C/SIGTERM stop a slow start-up cleanly).
        RuntimeError (also kept in ``start_error``) when that fails or takes longer than
        ``start_timeout_s``; any failure or interrupt stops what was started."""
        if self._harness is not None:
            return
        try:
            self._launch()
            self._startup_request()
        except WorkerFailed as exc:
            self.start_error = f"the pipeline failed at start-up: {str(exc).splitlines()[0]}"
        except BaseException:
            self.shutdown()
            raise
        if self.start_error is not None:
            self.shutdown()
            raise RuntimeError(self.start_error)

    def _startup_request(self) -> None:
        assert self._harness is not None
        rid = next(self._ids)
        self._req_q.put((rid, False, time.perf_counter(), [_probe_image()]))
        deadline = time.monotonic() + self.conf.start_timeout_s
        for kind, payload in self._harness.messages(self.conf.start_timeout_s):
            if kind == "copies":
                self._count(payload)
            elif kind == "request" and payload["rid"] == rid:
                if "error" in payload:
                    self.start_error = f"the start-up request failed: {payload['error']}"
                return
            if time.monotonic() > deadline:
                break
        self.start_error = (
            f"the pipeline did not serve its start-up request within "
            f"{self.conf.start_timeout_s:g} s"
        )

    async def start(self) -> None:
        """:meth:`launch` (in a thread, unless done already), then follow the workers."""
        self._loop = asyncio.get_running_loop()
        if self._harness is None:
            await asyncio.to_thread(self.launch)
        self._reader = threading.Thread(target=self._read, name="emulator-reader", daemon=True)
        self._reader.start()

    def _launch(self) -> None:
        c = self.conf
        harness = self._harness = _harness(self.prefix)
        job = c.job(harness.prefix, harness.init_file)
        self._req_q, self._stop_evt = harness.ctx.Queue(), harness.ctx.Event()
        pipes = [harness.pipe() for _ in range(job.workers)]
        for r in range(job.ranks):
            conns = [p[1] for p in pipes] if r == 0 else []
            harness.start(f"rank{r}", serve_rank_main, job, r, conns, self._req_q, self._stop_evt)
        for w, (send_end, _) in enumerate(pipes):
            harness.start(f"producer{w}", producer_main, job, None, w, self._req_q, send_end)

    async def close(self) -> None:
        await asyncio.to_thread(self.shutdown)
        self._fail_all("the server is shutting down")

    def shutdown(self, join_s: float = 5.0) -> None:
        """Stop every process and remove leftovers (idempotent)."""
        self._stopping = True
        if self._stop_evt is not None:
            self._stop_evt.set()  # rank 0 stops within its idle wait, then the producers
        if self._reader is not None:
            self._reader.join(join_s)
        if self._harness is not None:
            self.leftover_segments = self._harness.stop()  # terminates what still runs
            self._harness = None
        if self._req_q is not None:  # what no producer took is dropped, not waited for
            self._req_q.cancel_join_thread()

    # ------------------------------------------------------------ worker messages

    def _read(self) -> None:
        """Reader thread: worker messages until every worker exited or one failed."""
        assert self._harness is not None
        try:
            for kind, payload in self._harness.messages(math.inf):
                if kind == "request":
                    self._call(self._resolve, payload)
                elif kind == "tokens":
                    self._call(self._tokens, payload)
                elif kind == "copies":
                    self._count(payload)
            if not self._stopping:
                self._call(self._die, "the pipeline processes exited")
        except WorkerFailed as exc:
            if not self._stopping:
                self._call(self._die, self._cause(exc))
        except Exception as exc:  # the queue closed under us at shutdown, or a bug
            if not self._stopping:
                self._call(self._die, f"reading the pipeline failed: {type(exc).__name__}: {exc}")

    def _cause(self, exc: WorkerFailed) -> str:
        """A worker that crashed (killed, or exited without reporting: code not 0/1) is the
        cause of what its peers then report (a closed pipe, a gloo peer gone)."""
        first = str(exc).splitlines()[0]
        procs = self._harness.procs if self._harness is not None else {}
        crashed = [
            f"worker {n} died with exit code {p.exitcode}"
            for n, p in procs.items()
            if p.exitcode not in (None, 0, 1)
        ]
        if not crashed or "died with exit code" in first:
            return first
        return f"{'; '.join(crashed)} (then: {first})"

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                self._loop.call_soon_threadsafe(fn, *args)

    def _count(self, rows: Sequence[CopyRow]) -> None:
        if self._ledger is not None:
            self._ledger.count(rows)

    def _resolve(self, rec: PipelineRequest) -> None:
        if self._ledger is not None and "t_step" in rec:
            self._ledger.step(rec["t_step"], rec.get("batch_requests", 1))
        fut = self._pending.get(rec["rid"])
        if fut is not None and not fut.done():
            fut.set_result(rec)

    def _tokens(self, step: TokensMessage) -> None:
        """A decode step's tokens to their streams (a stream that went away: dropped)."""
        for rid in step["rids"]:
            q = self._decoding.get(rid)
            if q is not None:
                q.put_nowait(step["t"])
        for rid in step["done"]:
            self._decoding.pop(rid, None)

    def _die(self, message: str) -> None:
        if self.dead is not None:
            return
        self.dead = message
        self._fail_all(f"the emulated pipeline failed: {message}")
        if self.on_dead is not None:
            self.on_dead(message)

    def _fail_all(self, message: str) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(BackendError(503, message))
        for q in self._decoding.values():  # open streams end (NaN: the backend failed)
            q.put_nowait(math.nan)
        self._decoding.clear()

    # -------------------------------------------------------------------- requests

    def flush_cache(self) -> bool:
        """Empty every producer's preprocess cache before it serves the next request sent
        after this call (SGLang's ``/flush_cache``); False when the arm has no cache."""
        self._cache_epoch += 1
        o = self.conf.opts
        return get_profile(o.runtime_spec).preprocess_cache and not arm(o.arm).proposed

    async def submit(
        self, request_id: str, images: list[bytes], prompt_tokens: int, max_tokens: int = 1
    ) -> FirstToken:
        if self.dead is not None:
            raise BackendError(503, f"the emulated pipeline failed: {self.dead}")
        if self._loop is None or self._req_q is None or self._stopping:
            raise BackendError(503, "the emulated pipeline is not running")
        rid = next(self._ids)
        fut = self._loop.create_future()
        self._pending[rid] = fut
        tokens: asyncio.Queue[float] = asyncio.Queue()
        if max_tokens > 1:
            self._decoding[rid] = tokens
        try:
            # a cancelled request still runs in the pipeline; its answer is dropped
            self._req_q.put(
                (rid, False, time.perf_counter(), list(images), max_tokens, self._cache_epoch)
            )
            rec = await fut
        except BaseException:
            self._decoding.pop(rid, None)
            raise
        finally:
            self._pending.pop(rid, None)
        t_done = time.perf_counter()
        if "error" in rec:
            self._decoding.pop(rid, None)
            status = 400 if rec["error"].split(":")[0] in _DECODE_ERRORS else 500
            raise BackendError(status, f"the producer rejected the request: {rec['error']}")
        first = first_token(rec, t_done, self.conf)
        return replace(first, next_token=tokens.get) if max_tokens > 1 else first


def first_token(rec: PipelineRequest, t_done: float, conf: EmulatorConfig) -> FirstToken:
    """What a request's pipeline record tells the server and the client: stage seconds,
    the facts of REPORTED, the forward step it was served in (``batch``, a step id) and
    the image tokens the processor made. The prompt's text tokens are the server's count
    of the request's text (``usage``): the prefill stand-in's fixed text length
    (``StandinCost.text_tokens_per_request``) sizes its cost only, it is not the prompt."""
    facts: Mapping[str, Any] = rec  # its stamps and REPORTED, by name
    stamps = [facts[b] for b in STAMPS] + [t_done]
    stages = {s: max(0.0, b - a) for s, a, b in zip(STAGES, stamps[:-1], stamps[1:], strict=True)}
    report: dict[str, Any] = {k: facts[k] for k in REPORTED if k in facts}
    report.update(arm=conf.arm, batch=round(rec["t_step"] * 1e6))
    return FirstToken(
        stages_s=stages,
        image_tokens=int(rec.get("image_tokens", 0)),
        report=report,
        hooks=conf.hooks,
    )
