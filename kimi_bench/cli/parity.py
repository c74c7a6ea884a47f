"""``kimi-bench parity``."""

from __future__ import annotations

from pathlib import Path
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


def parity(
    images: Annotated[
        Path | None,
        typer.Option(
            "--images",
            help="Folder of your own inputs (any file PIL opens; .pt/.npy tensors too). "
            "Default: the built-in corpus of 27 inputs.",
            file_okay=False,
        ),
    ] = None,
    preset: PresetOpt = "kimi-k3",
    config: ConfigOpt = None,
    device: DeviceOpt = "auto",
    ranks: Annotated[int, typer.Option("--ranks", help="Vision-DP ranks (owners).", min=1)] = 2,
    runtime: RuntimeOpt = "sglang-0.5.23",
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="Override the runtime profile's decision scope. request: a request's images "
            "are deferred together (the PR); image: each image decides on its own bytes "
            "(0.5.23 with the preprocess cache).",
        ),
    ] = None,
    images_per_request: Annotated[
        int, typer.Option("--images-per-request", min=1, help="Images per request.")
    ] = 1,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Requests per forward batch.")
    ] = 4,
    max_pixels: Annotated[
        int,
        typer.Option("--max-pixels", min=1, help="Refuse inputs with more pixels (bomb guard)."),
    ] = 100_000_000,
    dump: Annotated[
        Path | None,
        typer.Option(
            "--dump",
            help="Write DIR/<stem>.pt with the eager and deferred FP32 pixel_values and grid_thw.",
            file_okay=False,
        ),
    ] = None,
    seed: SeedOpt = 0,
    out: OutOpt = None,
) -> None:
    """Are eager and deferred features bit-identical on these images, and why was each
    image deferred or not?

    Runs both arms (eager: preprocess at the producer, FP32 to every rank; deferred: uint8
    to the owner, materialized there) and compares the owner's pixel_values with
    torch.equal in FP32 and after the BF16 cast.

    Exit codes: 0 all accepted inputs identical, 1 any differs, 2 usage error or no usable
    input. Example: kimi-bench parity --images ~/photos --device cuda --out parity-out
    """
    from kimi_bench.bench.parity import ParityOptions, exit_code, run_parity
    from kimi_bench.config import ConfigError, resolve_config
    from kimi_bench.corpus import InputError
    from kimi_bench.environment import resolve_device
    from kimi_bench.report.emit import emit_parity

    try:
        cfg = resolve_config(preset, config)
        opts = ParityOptions(
            cfg=cfg,
            images_dir=images,
            device=device,
            ranks=ranks,
            runtime=runtime,
            policy=policy,  # type: ignore[arg-type]
            images_per_request=images_per_request,
            batch_size=batch_size,
            seed=seed,
            max_pixels=max_pixels,
            dump_dir=dump,
        )
        opts.validate()
        resolve_device(device)  # a missing CUDA device is a usage error, before any work
    except (ConfigError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    out_dir = out or default_out("parity")
    try:
        with progress_bar(None, "parity") as bar:
            task = bar.add_task("parity", total=None, item="")

            def tick(name: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, item=name)

            report = run_parity(opts, progress=tick)
    except (InputError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    emit_parity(report, out_dir)
    rows = [
        {
            "input": r["name"],
            "WxH": f"{r['width']}x{r['height']}" if r["width"] else None,
            "mode": r["mode"],
            "defer": r["deferred"],
            "grid": r["grid_thw"],
            "owner": r["owner_rank"],
            "fp32": r["bit_exact_fp32"],
            "bf16": r["bit_exact_bf16"],
            "vs PIL": r["max_abs_diff_vs_pil"],
            "error": r["error"],
        }
        for r in report.results
    ]
    console.print(
        rich_table("parity (eager vs deferred, torch.equal)", rows, list(rows[0]) if rows else [])
    )
    for note in report.notes:
        err_console.print(f"[dim]note: {note}[/]")
    code = exit_code(report)
    style = {0: "bold green", 1: "bold red", 2: "bold yellow"}[code]
    console.print(f"[{style}]{report.summary['verdict']}[/]")
    console.print(f"report: {out_dir / 'report.json'}")
    raise typer.Exit(code=code)
