"""``kimi-bench micro``: options from ``options.MicroOptions``, rendering here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kimi_bench.cli.build import build, command, given, option_params, output_params
from kimi_bench.cli.common import (
    OutputFormat,
    fail_line,
    note,
    say,
    usage_error,
    verdict_lines,
    warn,
)
from kimi_bench.cli.output import append_jsonl, resolve_output, write_report
from kimi_bench.options import MicroOptions

if TYPE_CHECKING:
    from kimi_bench.report.model import Report

DOC = """Where do the milliseconds and bytes go? Stage by stage, per arm, with a real
producer process and --ranks gloo ranks running the one pipeline.

Stages: producer, d2h, serialize, to_rank0, broadcast, take_copy, pre_embed_move,
owner_h2d, owner_materialize. Every byte move is in the copy ledger (report: copies).
Each repeat checks that the owner's BF16 output equals eager's (torch.equal); a mismatch
fails the run. Also reports the floor: each owner's H2D of its raw bytes + materialize,
all ranks at once (the least any arm does). Every arm also runs --control-repeats rounds
on a minimal payload (one merged token per image): the control plane; each arm's payload
cost (arm minus control) comes with an interval, and speedups on it beside the totals'.
Defaults fit the machine: the PR shape (8 ranks, 20 repeats) on a GPU, 2 ranks and 5
repeats on a CPU. The run is --launches (3) independent process launches, each with fresh
processes, its warm-up and its repeats; a speedup's interval is a 95% prediction interval
for a re-run's median, from the spread between launches and within them.

Example: kimi-bench micro --synthetic 4x1536x1024 --ranks 8 --transport shm --output-dir m8
"""


def _body(values: dict[str, Any]) -> None:
    # options first, with no torch import: a usage error comes back at once
    from kimi_bench.domain.config import ConfigError, resolve_config
    from kimi_bench.engine.launch import LaunchError, detect_world
    from kimi_bench.options import OptionsError, resolve_defaults

    try:
        opts = build(MicroOptions, given(values, MicroOptions))
        resolve_config(opts.preset, opts.config)
        world = detect_world(opts.launcher)
        from kimi_bench.infra.environment import resolve_device  # imports torch

        dev = resolve_device(opts.device)  # a missing CUDA device is a usage error
        if opts.images and world.writes_report:  # an image that does not decode: refused now
            from kimi_bench.bench.micro_setup import folder_images

            folder_images(opts.images)
        out_dir, fmt = resolve_output(values, "micro") if world.writes_report else (None, None)
    except (OptionsError, ConfigError, LaunchError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    from kimi_bench.bench.estimate import CPU, busy_note, micro_s
    from kimi_bench.bench.launch_runs import run_micro_on
    from kimi_bench.bench.micro import MicroFailed, exit_code
    from kimi_bench.cli.progress import JobProgress, fmt_duration
    from kimi_bench.engine.start import RankFailed, for_world
    from kimi_bench.report import verdicts
    from kimi_bench.report.emit import emit_micro

    if not world.writes_report:  # a torchrun rank other than 0: its part, then exit
        try:
            run_micro_on(world, opts)
        except (RankFailed, MicroFailed) as exc:
            fail_line(str(exc).splitlines()[0], label=f"rank {world.rank}:")
            raise typer.Exit(code=1) from None
        raise typer.Exit(code=0)
    assert out_dir is not None and fmt is not None
    shown, profile = resolve_defaults(for_world(opts, world), "micro", dev.type)
    estimate = micro_s(shown, dev.type)
    say(
        f"micro: {shown.synthetic if not shown.images else shown.images}; {shown.ranks} ranks, "
        f"{shown.transport}, arms {','.join(shown.arms)}, {shown.launches} launch(es) of "
        f"{shown.repeats} repeats "
        f"({profile} defaults); estimate ~{fmt_duration(estimate)}"
        + busy_note((shown.ranks or 1) + 1),
        style="dim",
        err=True,
    )
    failed: str | None = None
    try:
        with JobProgress("micro", [("micro", estimate - CPU["import_s"])]) as progress:
            progress.part("micro", 0, "repeats")
            report = run_micro_on(world, opts, lambda d, t: progress.step(d, t))
            assert report is not None
    except MicroFailed as exc:
        report, failed = exc.report, str(exc)
    except (LaunchError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    result = write_report(lambda d: emit_micro(report, d), out_dir)
    written, out_dir = result.files, result.folder
    _show_results(report, fmt, written)
    code = exit_code(report)
    verdict_lines(verdicts.lines(report.to_dict()))
    if failed:
        fail_line(failed, label="run failed:")
    jsonl = append_jsonl(values, report, out_dir)
    say(f"report: {out_dir / 'report.json'}", err=True)
    raise typer.Exit(code=max(code if not failed else 1, result.exit_code, jsonl))


def _show_results(report: Report, fmt: OutputFormat, written: Sequence[Path]) -> None:
    """The tables, the notes, a missing-chart hint and the floor line, on the terminal."""
    from kimi_bench.cli.tables import show_tables
    from kimi_bench.report.figbase import PLOT_HINT
    from kimi_bench.report.view import view_of

    view = view_of(report)
    shown = ("micro.stages", "micro.copies", "micro.control", "micro.comparisons", "micro.noise")
    show_tables([t for t in view.tables if t.key in shown], fmt)
    for line in view.notes:
        note(line)
    if not any(p.suffix == ".png" for p in written):
        warn(PLOT_HINT, label="no chart:")
    s = report.summary
    ratio = s.get("deferred_over_floor")
    if s.get("floor_ms") and ratio:
        over = (
            f"{ratio:.1f}x the floor"
            if ratio >= 1
            else "BELOW the floor: a measurement problem, see the notes"
        )
        say(
            f"floor {s['floor_ms']:.2f} ms; deferred median {s['deferred_median_ms']:.2f} ms "
            f"= {over}",
            err=True,
        )


micro = command(option_params(MicroOptions) + output_params(), _body, DOC)
