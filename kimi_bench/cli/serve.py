"""``kimi-bench serve-ab``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kimi_bench.cli.common import (
    ConfigOpt,
    console,
    default_out,
    err_console,
    progress_bar,
    rich_table,
    usage_error,
)


def _opt(help_text: str, name: str) -> Any:
    return typer.Option(name, help=help_text + " [default: from the scenario file]")


def serve_ab(
    rates: Annotated[
        str | None, _opt("Request rates in req/s, comma-separated; inf = all at once.", "--rates")
    ] = None,
    requests: Annotated[
        int | None, _opt("Measured requests per rate and arm.", "--requests")
    ] = None,
    images_per_request: Annotated[
        int | None, _opt("Images per request.", "--images-per-request")
    ] = None,
    resolution: Annotated[
        str | None, _opt("WIDTHxHEIGHT of request images.", "--resolution")
    ] = None,
    ranks: Annotated[int | None, _opt("Scheduler (TP) ranks.", "--ranks")] = None,
    processor_workers: Annotated[
        int | None, _opt("Producer (tokenizer worker) processes.", "--processor-workers")
    ] = None,
    transport: Annotated[str | None, _opt("shm or pickle carrier.", "--transport")] = None,
    runtime: Annotated[
        str | None,
        _opt("Runtime behaviour to emulate: sglang-0.5.23 or pr-33921.", "--runtime"),
    ] = None,
    arms: Annotated[str | None, _opt("Arms to run: eager,deferred.", "--arms")] = None,
    burstiness: Annotated[
        float | None, _opt("Gamma shape of arrival gaps (1 = Poisson).", "--burstiness")
    ] = None,
    warmup_requests: Annotated[
        int | None, _opt("Unmeasured requests first.", "--warmup-requests")
    ] = None,
    repeats: Annotated[
        int | None, _opt("Repeats per rate and arm (>= 2 gives throughput intervals).", "--repeats")
    ] = None,
    image_format: Annotated[str | None, _opt("jpeg (quality 85) or png.", "--image-format")] = None,
    image_content: Annotated[str | None, _opt("random, blank or photo.", "--image-content")] = None,
    request_timeout: Annotated[
        float | None,
        _opt(
            "Seconds without progress before pending requests count as failed.", "--request-timeout"
        ),
    ] = None,
    preset: Annotated[str | None, _opt("kimi-k3 or kimi-k2.5.", "--preset")] = None,
    config: ConfigOpt = None,
    device: Annotated[str | None, _opt("auto, cpu or cuda.", "--device")] = None,
    seed: Annotated[int | None, _opt("Seed for images and arrivals.", "--seed")] = None,
    note: Annotated[
        list[str] | None,
        typer.Option("--note", help="Text added to the report's notes (repeatable)."),
    ] = None,
    scenario: Annotated[
        str, typer.Option("--scenario", help="Scenario TOML (a built-in name or a path).")
    ] = "serve-ab",
    out: Annotated[
        Path | None, typer.Option("--out", file_okay=False, help="Output folder.")
    ] = None,
) -> None:
    """What happens to TTFT and throughput at my request rates? The same seeded arrival
    trace through an eager and a deferred pipeline of real processes (load generator,
    producers that decode JPEG/PNG, gloo scheduler ranks with continuous batching).

    Reports TTFT mean/median/p90/p99, req/s, images/s, tokens/s, bytes moved, and A/B
    deltas with 95% intervals. Encoder and prefill are stand-ins (see the report notes).

    Example: kimi-bench serve-ab --rates 2,8,inf --ranks 8 --requests 120 --out sab
    """
    from kimi_bench.bench.images import ImageSpecError
    from kimi_bench.bench.serve import ServeFailed, run_serve_ab, serve_options
    from kimi_bench.bench.serve_report import build_serve_report
    from kimi_bench.config import ConfigError
    from kimi_bench.environment import resolve_device
    from kimi_bench.report.emit import emit_serve
    from kimi_bench.report.plots import PLOT_HINT
    from kimi_bench.scenario import ScenarioError, load_scenario

    try:
        opts = serve_options(
            load_scenario(scenario).get("serve_ab", {}),
            {
                "rates": rates,
                "requests": requests,
                "images_per_request": images_per_request,
                "resolution": resolution,
                "ranks": ranks,
                "processor_workers": processor_workers,
                "transport": transport,
                "runtime": runtime,
                "arms": arms,
                "burstiness": burstiness,
                "warmup_requests": warmup_requests,
                "repeats": repeats,
                "seed": seed,
                "device": device,
                "image_format": image_format,
                "image_content": image_content,
                "request_timeout_s": request_timeout,
                "preset": preset,
            },
            config_path=config,
            notes=note or (),
        )
        opts.validate()
        dev = resolve_device(opts.device)
    except (ScenarioError, ConfigError, ImageSpecError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    out_dir = out or default_out("serve-ab")
    total = len(opts.rates) * opts.repeats * len(opts.arms)
    error = None

    def write(runs: list[dict[str, Any]], err: str | None) -> Any:
        report = build_serve_report(opts, runs, dev, err)
        written = emit_serve(report, out_dir)
        return report, written

    with progress_bar(total, "serve-ab") as bar:
        task = bar.add_task("serve-ab", total=total, item="")

        def on_run(runs: list[dict[str, Any]]) -> None:
            last = runs[-1]
            bar.update(task, completed=len(runs), item=f"{last['arm']} @ {last['rate_label']}")
            write(runs, None)  # partial results on disk after every pipeline

        try:
            runs = run_serve_ab(opts, on_run=on_run)
        except ServeFailed as exc:
            runs, error = exc.runs, str(exc)
        except KeyboardInterrupt:
            runs, error = [], "interrupted by the user (Ctrl-C)"
    report, written = write(runs, error)
    if not any(p.suffix == ".png" for p in written):
        err_console.print(f"[yellow]no plots:[/] {PLOT_HINT}")
    console.print(rich_table("serve-ab", report.results, report.views[0].columns or []))
    console.print(
        rich_table(
            "A/B deltas (deferred vs eager)",
            report.views[1].rows,
            list(report.views[1].rows[0]) if report.views[1].rows else [],
        )
    )
    for note in report.notes:
        err_console.print(f"[dim]note: {note}[/]")
    console.print(f"[{'bold red' if error else 'bold green'}]{report.summary['verdict']}[/]")
    console.print(f"report: {out_dir / 'report.json'}")
    raise typer.Exit(code=1 if error or report.summary["failed_requests"] else 0)
