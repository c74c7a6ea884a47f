"""``kimi-bench serve``: the emulated serving pipeline behind an OpenAI-compatible API."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import err_console, usage_error
from kimi_bench.infra.limits import MAX_CONFIG_BYTES, read_text_or
from kimi_bench.options import ServeCommandOptions

SERVE_DOC = """Serve the emulated pipeline of one arm over HTTP, as an OpenAI-compatible server.

POST /v1/chat/completions (streaming; images as base64 data URLs,
decoded by the producer processes), GET /v1/models, /health, /version,
/metrics (Prometheus: request and stage histograms, bytes moved per
stage and per copy-ledger entry). The first token streams when the
emulated first token is ready. Encoder and prefill are stand-ins, as in
serve-ab.

It answers to the --served-model-name names (vLLM's 404 for others, or
any name with --accept-any-model). usage is emulated: text tokens
counted from the request (GPT-2 pre-tokenizer pieces), image tokens
from the emulated processor; each streamed chunk is one token.

Images over --max-pixels (read from their header, nothing decoded) and
bodies over --max-body-mb are refused with an OpenAI-style JSON error
(400 / 413) and one console line each. Stops cleanly on Ctrl-C or
SIGTERM: open streams end with an error event, every pipeline process
is reaped before it exits. Exits by itself (code 1) when the pipeline
fails; exit code 2 for a usage error, e.g. a --port in use or a --host that
cannot be bound (nothing is started then).

Example: kimi-bench serve --arm deferred --port 8001 --ranks 2
"""


def _serve(opts: ServeCommandOptions, _: dict[str, Any]) -> None:
    from kimi_bench.serving.launch import ServerStartError, bind_socket

    arm, ranks, transport, runtime = opts.arm, opts.ranks, opts.transport, opts.runtime
    model, *aliases = opts.served_model_name
    processor_workers, host, port = opts.processor_workers, opts.host, opts.port
    try:  # a port in use or a bad --host: refused at once, before any line says where
        bind_socket(host, port).close()
    except ServerStartError as exc:
        raise usage_error(str(exc)) from None
    from kimi_bench.serving.admission import ServerOptions
    from kimi_bench.serving.emulator import EmulatorConfig
    from kimi_bench.serving.emulator_serve import serve_emulator

    try:
        conf = EmulatorConfig.from_options(opts)
    except ValueError as exc:  # --config unreadable (ConfigError), --device cuda without CUDA,
        # a bad --fault-hooks
        raise usage_error(str(exc)) from None
    api_key_env = opts.api_key_env
    key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not key:
        raise usage_error(f"--api-key-env {api_key_env}: the variable is not set")
    server_opts = ServerOptions.from_options(opts, api_key=key)
    err_console.print(
        escape(
            f"kimi-bench serve: arm {arm}, {ranks} rank(s), {processor_workers} producer(s), "
            f"{transport}, {runtime}, {conf.device}, model {model!r}"
            + (f" (aliases {', '.join(map(repr, aliases))})" if aliases else "")
            + (" (any model name accepted)" if opts.accept_any_model else "")
            + f" on http://{host}:{port} "
            "(ready when /health answers 200)"
        )
    )
    try:
        served = serve_emulator(conf, server_opts, host, port)
    except ServerStartError as exc:  # taken between the check above and the bind
        raise usage_error(str(exc)) from None
    backend = served.backend
    if backend.start_error or backend.dead:
        what = "did not start" if backend.start_error else "failed"
        err_console.print(
            f"[bold red]error:[/] the emulated pipeline of arm {arm} {what}: "
            f"{escape(backend.start_error or backend.dead or '')}"
        )
        raise typer.Exit(code=1)
    if backend.leftover_segments:
        err_console.print(
            f"removed {len(backend.leftover_segments)} leftover shared-memory segment(s)"
        )
    err_console.print(escape(_stopped_line(served.signal, served.requests)))


def _stopped_line(sig: int | None, requests: dict[str, int]) -> str:
    """``kimi-bench serve: stopped on SIGINT (Ctrl-C); 12 request(s): 10 ok, 2 ...``"""
    how = ""
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        how = f" on {name}" + (" (Ctrl-C)" if sig == signal.SIGINT else "")
    total = sum(requests.values())
    counts = ", ".join(f"{n} {outcome}" for outcome, n in requests.items())
    return f"kimi-bench serve: stopped{how}; {total} request(s)" + (f": {counts}" if total else "")


serve_server = model_command(ServeCommandOptions, _serve, SERVE_DOC)


def serve_from_options(
    path: Annotated[Path, typer.Argument(help="A ServeCommandOptions model as JSON.")],
) -> None:
    """Serve the options model in PATH (how serve-ab starts its emulator servers: the
    typed options travel whole, not as a command line). Hidden from --help."""
    try:
        text = read_text_or(ValueError, path, MAX_CONFIG_BYTES, "serve options file")
        opts = ServeCommandOptions.model_validate_json(text)
    except (ValidationError, ValueError) as exc:
        raise usage_error(f"{path}: not a serve options file ({exc})") from None
    _serve(opts, {})
