"""``kimi-bench serve``: the emulated serving pipeline behind an OpenAI-compatible API."""

from __future__ import annotations

import math
import os
import signal
from typing import Annotated, Any

import typer
from rich.markup import escape

from kimi_bench.cli.common import (
    ConfigOpt,
    DeviceOpt,
    PresetOpt,
    RuntimeOpt,
    err_console,
    usage_error,
)
from kimi_bench.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_PIXELS,
    REQUEST_PIXELS_PER_IMAGE_LIMIT,
)
from kimi_bench.runtime import DEFAULT_RUNTIME

# the limits a server left running applies (kimi_bench.serving.intake)
MaxPixelsOpt = Annotated[
    int,
    typer.Option(
        "--max-pixels",
        min=1,
        max=2**31,
        help="Refuse (HTTP 400) an image with more pixels, read from its header before "
        "anything is decoded (a decompression bomb guard; parity's limit). PIL itself "
        "refuses images over 178,956,970 pixels.",
    ),
]
MaxRequestPixelsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-request-pixels",
        min=1,
        max=2**40,
        show_default=False,
        help="Refuse (HTTP 400) a request whose images have more pixels together. "
        f"Default: {REQUEST_PIXELS_PER_IMAGE_LIMIT}x --max-pixels.",
    ),
]
MaxBodyMbOpt = Annotated[
    float,
    typer.Option(
        "--max-body-mb",
        min=0.001,
        max=4096,
        help="Refuse (HTTP 413) a request body larger than this many MiB (base64 images make it).",
    ),
]


def _standins(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs -> StandinCost fields; ValueError names a bad pair."""
    from dataclasses import fields

    from kimi_bench.engine.standins import StandinCost

    known = {f.name: f.type for f in fields(StandinCost)}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise ValueError(
                f"--standin takes KEY=VALUE with KEY one of {', '.join(known)}, got {pair!r}"
            )
        try:
            out[key] = int(value) if key == "text_tokens_per_request" else float(value)
            if not math.isfinite(out[key]) or out[key] < 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"--standin {key}: {value!r} is not a finite number >= 0") from None
    return out


def serve_server(
    arm: Annotated[
        str,
        typer.Option("--arm", help="Pipeline to serve: eager or deferred (as serve-ab's arms)."),
    ],
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8000,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    ranks: Annotated[int, typer.Option("--ranks", min=1, max=64, help="Scheduler (TP) ranks.")] = 2,
    processor_workers: Annotated[
        int,
        typer.Option(
            "--processor-workers", min=1, max=64, help="Producer (tokenizer worker) processes."
        ),
    ] = 2,
    transport: Annotated[str, typer.Option("--transport", help="shm or pickle carrier.")] = "shm",
    runtime: RuntimeOpt = DEFAULT_RUNTIME,
    preset: PresetOpt = "kimi-k3",
    config: ConfigOpt = None,
    device: DeviceOpt = "auto",
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="Name of an environment variable holding an API key; when set, /v1/* "
            "requires 'Authorization: Bearer <key>'.",
        ),
    ] = None,
    decode_interval_ms: Annotated[
        float,
        typer.Option(
            "--decode-interval-ms",
            min=0,
            max=60_000,
            help="Gap between streamed tokens after the first (emulated decode: sets the "
            "TPOT/ITL that clients measure with --max-tokens > 1; 0: all at once).",
        ),
    ] = 0.0,
    standin: Annotated[
        list[str] | None,
        typer.Option(
            "--standin",
            help="Stand-in cost KEY=VALUE (encoder_gflop_per_patch, prefill_gflop_per_token, "
            "text_tokens_per_request, cpu_flops_scale); repeatable.",
        ),
    ] = None,
    start_timeout: Annotated[
        float,
        typer.Option(
            "--start-timeout", min=1, max=86_400, help="Seconds for the pipeline to come up."
        ),
    ] = 180.0,
    arena_image: Annotated[
        str,
        typer.Option(
            "--arena-image",
            help="zero-copy arm: arena slots hold requests of --image-count images of this "
            "WIDTHxHEIGHT (larger images fail alone).",
        ),
    ] = "1536x1024",
    image_count: Annotated[
        int, typer.Option("--image-count", min=1, max=64, help="zero-copy arm: images per request.")
    ] = 1,
    arena_requests: Annotated[
        int, typer.Option("--arena-requests", min=2, max=4096, help="zero-copy arm: arena slots.")
    ] = 64,
    max_pixels: MaxPixelsOpt = DEFAULT_MAX_PIXELS,
    max_request_pixels: MaxRequestPixelsOpt = None,
    max_body_mb: MaxBodyMbOpt = DEFAULT_MAX_BODY_BYTES / 2**20,
    fault: Annotated[str | None, typer.Option("--fault", hidden=True)] = None,
    # what the API answers to and how it counts tokens (kimi_bench.serving.models, .usage)
    served_model_name: Annotated[
        list[str] | None,
        typer.Option(
            "--served-model-name",
            "--model",
            metavar="NAME",
            show_default=False,
            help="A model name the API answers to; repeat for aliases (vLLM's "
            "--served-model-name A B is --served-model-name A --served-model-name B). The "
            "first is listed first in /v1/models and named in every response; a client "
            "that loads a tokenizer or processor by model name can pass its path here. "
            "Other names get HTTP 404, as in vLLM. Default: kimi-bench-emulator.",
        ),
    ] = None,
    accept_any_model: Annotated[
        bool,
        typer.Option(
            "--accept-any-model",
            help="Serve requests for any model name, as SGLang does, with one warning line "
            "per unknown name. usage is emulated either way: text tokens are GPT-2 "
            "pre-tokenizer pieces of the request's text parts, image tokens the emulated "
            "processor's, itemised in usage.prompt_tokens_details.",
        ),
    ] = False,
) -> None:
    """Serve the emulated pipeline of one arm over HTTP, as an OpenAI-compatible server.

    POST /v1/chat/completions (streaming; images as base64 data URLs,
    decoded by the producer processes), GET /v1/models, /health, /version,
    /metrics (Prometheus: request and stage histograms, bytes moved per
    stage and per copy-ledger entry). The first token streams when the
    emulated first token is ready. Encoder and prefill are stand-ins, as in
    serve-ab.

    It answers to the --served-model-name names (vLLM's 404 for others,
    or any name with --accept-any-model). usage is emulated: text tokens
    counted from the request (GPT-2 pre-tokenizer pieces), image tokens
    from the emulated processor; each streamed chunk is one token.

    Images over --max-pixels (read from their header, nothing decoded) and
    bodies over --max-body-mb are refused with an OpenAI-style JSON error
    (400 / 413) and one console line each. Stops cleanly on Ctrl-C or
    SIGTERM: open streams end with an error event, every pipeline process
    is reaped before it exits. Exits by itself (code 1) when the pipeline
    fails.

    Example: kimi-bench serve --arm deferred --port 8001 --ranks 2
    """
    from kimi_bench.config import ConfigError, resolve_config
    from kimi_bench.engine.standins import StandinCost
    from kimi_bench.environment import resolve_device
    from kimi_bench.options import parse_resolution
    from kimi_bench.serving.emulator import EmulatorConfig, serve_emulator
    from kimi_bench.serving.launch import ServerStartError
    from kimi_bench.serving.server import DEFAULT_MODEL, ServerOptions

    for name, value in (
        ("--decode-interval-ms", decode_interval_ms),
        ("--start-timeout", start_timeout),
        ("--max-body-mb", max_body_mb),
    ):
        if not math.isfinite(value):
            raise usage_error(f"{name} must be a finite number, got {value}")
    for flag, value in (("--decode-interval-ms", decode_interval_ms),
                        ("--start-timeout", start_timeout)):  # fmt: skip
        if not math.isfinite(value):
            raise usage_error(f"{flag} must be a finite number, got {value!r}")
    try:
        conf = EmulatorConfig(
            arm=arm,
            cfg=resolve_config(preset, config),
            ranks=ranks,
            workers=processor_workers,
            transport=transport,
            device=resolve_device(device).type,
            runtime=runtime,
            cost=StandinCost(**_standins(standin or [])),
            start_timeout_s=start_timeout,
            image_size=parse_resolution(arena_image, "wxh"),
            images_per_request=image_count,
            arena_requests=arena_requests,
            fault=fault,
        )
        conf.validate()
    except (ConfigError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not key:
        raise usage_error(f"--api-key-env {api_key_env}: the variable is not set")
    names = [n.strip() for n in served_model_name or [DEFAULT_MODEL]]
    if not all(names):
        raise usage_error("--served-model-name: a model name cannot be empty")
    model, aliases = names[0], tuple(n for n in names[1:] if n != names[0])
    server_opts = ServerOptions(
        model=model,
        aliases=aliases,
        accept_any_model=accept_any_model,
        api_key=key,
        decode_interval_s=decode_interval_ms / 1e3,
        max_pixels=max_pixels,
        max_request_pixels=max_request_pixels,
        max_body_bytes=round(max_body_mb * 2**20),
    )
    err_console.print(
        escape(
            f"kimi-bench serve: arm {arm}, {ranks} rank(s), {processor_workers} producer(s), "
            f"{transport}, {runtime}, {conf.device}, model {model!r}"
            + (f" (aliases {', '.join(map(repr, aliases))})" if aliases else "")
            + (" (any model name accepted)" if accept_any_model else "")
            + f" on http://{host}:{port} "
            "(ready when /health answers 200)"
        )
    )
    try:
        served = serve_emulator(conf, server_opts, host, port)
    except ServerStartError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(code=1) from None
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
