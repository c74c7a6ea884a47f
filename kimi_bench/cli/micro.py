"""``kimi-bench micro``."""

from __future__ import annotations

from typing import Annotated

import typer

from kimi_bench.cli.common import (
    ConfigOpt,
    DeviceOpt,
    OutOpt,
    PresetOpt,
    RuntimeOpt,
    SeedOpt,
    console,
    default_out,
    err_console,
    progress_bar,
    rich_table,
    usage_error,
)


def micro(
    images: Annotated[
        str,
        typer.Option(
            "--images",
            help="COUNTxWIDTHxHEIGHT (width first, like PIL), comma-separated for mixes: "
            "2x1536x1024,1x4096x3072.",
        ),
    ] = "4x1536x1024",
    ranks: Annotated[int, typer.Option("--ranks", min=1, help="Scheduler (TP) ranks.")] = 8,
    transport: Annotated[
        str,
        typer.Option(
            "--transport",
            help="shm: tensors copied into POSIX shared memory, names pickled (one node); "
            "pickle: bytes inline (several nodes).",
        ),
    ] = "shm",
    content: Annotated[
        str, typer.Option("--content", help="random (seeded), blank, or photo (real samples).")
    ] = "random",
    runtime: RuntimeOpt = "sglang-0.5.23",
    preset: PresetOpt = "kimi-k3",
    config: ConfigOpt = None,
    device: DeviceOpt = "auto",
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Measured repeats.")] = 20,
    warmup: Annotated[int, typer.Option("--warmup", min=0, help="Unmeasured repeats first.")] = 3,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Fail if no worker reports for this many s.")
    ] = 300.0,
    seed: SeedOpt = 0,
    note: Annotated[
        list[str] | None,
        typer.Option("--note", help="Text added to the report's notes (repeatable)."),
    ] = None,
    out: OutOpt = None,
) -> None:
    """Where do the milliseconds and bytes go? Stage-by-stage eager vs deferred with a real
    producer process and --ranks gloo ranks.

    Stages: producer, d2h, serialize, to_rank0, broadcast, take_copy, pre_embed_move,
    owner_h2d, owner_materialize. Each repeat checks the owner's BF16 output is identical
    across arms; a mismatch fails the run. Also reports the floor (one pinned H2D of the
    raw bytes + the materialize kernel).

    Example: kimi-bench micro --images 4x1536x1024 --ranks 8 --transport shm --out m8
    """
    from kimi_bench.bench.images import ImageSpecError, describe_spec, parse_image_spec
    from kimi_bench.bench.micro import MicroFailed, MicroOptions, exit_code, run_micro
    from kimi_bench.config import ConfigError, resolve_config
    from kimi_bench.environment import resolve_device
    from kimi_bench.report.emit import emit_micro
    from kimi_bench.report.plots import PLOT_HINT

    try:
        opts = MicroOptions(
            cfg=resolve_config(preset, config),
            groups=parse_image_spec(images),
            ranks=ranks,
            transport=transport,
            runtime=runtime,
            device=device,
            repeats=repeats,
            warmup=warmup,
            seed=seed,
            content=content,
            timeout_s=timeout,
            notes=tuple(note or ()),
        )
        opts.validate()
        resolve_device(device)  # a missing CUDA device is a usage error, before any work
        if content not in ("random", "blank", "photo"):
            raise ValueError(f"--content must be random, blank or photo, got {content!r}")
    except (ConfigError, ImageSpecError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    out_dir = out or default_out("micro")
    err_console.print(f"[dim]micro: {describe_spec(opts.groups)}; {ranks} ranks, {transport}[/]")
    failed: str | None = None
    try:
        with progress_bar(None, "micro") as bar:
            task = bar.add_task("micro", total=None, item="")
            report = run_micro(
                opts, progress=lambda d, t: bar.update(task, completed=d, total=t, item="repeats")
            )
    except MicroFailed as exc:
        report, failed = exc.report, str(exc)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    written = emit_micro(report, out_dir)
    console.print(
        rich_table(
            "micro: stage medians",
            report.results,
            ["arm", "stage", "median_ms", "p10_ms", "p90_ms", "bytes"],
        )
    )
    copies = report.views[1].rows if len(report.views) > 1 else []
    if copies:
        console.print(
            rich_table(
                "micro: copy ledger (one repeat)",
                copies,
                ["arm", "stage", "op", "src", "dst", "bytes", "count", "mirrors"],
            )
        )
    for line in report.notes:
        err_console.print(f"[dim]note: {line}[/]")
    if not any(p.suffix == ".png" for p in written):
        err_console.print(f"[yellow]no chart:[/] {PLOT_HINT}")
    s = report.summary
    if s.get("floor_ms") and s.get("deferred_over_floor"):
        console.print(
            f"floor {s['floor_ms']:.2f} ms; deferred median {s['deferred_median_ms']:.2f} ms "
            f"= {s['deferred_over_floor']:.1f}x the floor"
        )
    code = exit_code(report)
    console.print(f"[{'bold green' if code == 0 else 'bold red'}]{s['verdict']}[/]")
    if failed:
        err_console.print(f"[bold red]run failed:[/] {failed}")
    console.print(f"report: {out_dir / 'report.json'}")
    raise typer.Exit(code=code if not failed else 1)
