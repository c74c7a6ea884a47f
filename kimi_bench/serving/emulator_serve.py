"""``kimi-bench serve``: the emulator's backend (``emulator``) behind the OpenAI-compatible
server (``server``) until SIGTERM or SIGINT, or until its pipeline fails."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from kimi_bench.serving.admission import ServerOptions
from kimi_bench.serving.emulator import EmulatorBackend, EmulatorConfig
from kimi_bench.serving.launch import bind_socket, reap_children_at_exit, serve
from kimi_bench.serving.server import create_app
from kimi_bench.serving.server_metrics import ServerMetrics


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@dataclass(frozen=True)
class Served:
    """How ``kimi-bench serve`` ended: the backend (``dead``: why the pipeline failed,
    ``start_error``: why it never started, ``leftover_segments``), the signal that
    stopped the server (None if none did) and the requests by outcome."""

    backend: EmulatorBackend
    signal: int | None
    requests: dict[str, int]


def serve_emulator(
    conf: EmulatorConfig,
    server_opts: ServerOptions,
    host: str,
    port: int,
    graceful_timeout_s: float = 5.0,
) -> Served:
    """``kimi-bench serve``: the emulator behind the OpenAI-compatible server until SIGTERM
    or SIGINT, or until its pipeline fails (the server then stops itself, as a real
    server whose scheduler died does). Every pipeline process is stopped and reaped
    before this returns, and this process reaps every other child (multiprocessing's
    resource tracker) before it exits (``launch.reap_children_at_exit``).
    ServerStartError when the port cannot be bound."""
    sock = bind_socket(host, port)  # a port in use fails before the pipeline starts
    reap_children_at_exit()
    metrics = ServerMetrics()
    backend = EmulatorBackend(
        conf, metrics, on_dead=lambda _msg: os.kill(os.getpid(), signal.SIGTERM)
    )
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM acts as Ctrl-C during start-up
    try:
        backend.launch()
    except KeyboardInterrupt:
        backend.start_error = "interrupted during start-up"
    except RuntimeError:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    stopped_by = None
    try:
        if backend.start_error is None:
            app = create_app(backend, server_opts, metrics)
            stopped_by = serve(app, host, port, graceful_timeout_s=graceful_timeout_s, sock=sock)
    finally:
        sock.close()
        backend.shutdown()  # already done by the app's shutdown, unless serving failed
    return Served(backend, stopped_by, metrics.outcome_counts())
