"""``kimi-bench serve-ab``: options from ``options.ServeOptions``, rendering here."""

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
from kimi_bench.options import ScenarioFileOptions, ServeOptions

if TYPE_CHECKING:
    from kimi_bench.bench.serve_runs import ServeRun
    from kimi_bench.domain.config import PreprocessConfig
    from kimi_bench.engine.launch import World
    from kimi_bench.report.view import View

DOC = """What happens to TTFT and throughput at my request rates? The same seeded arrival
trace through each arm's pipeline of real processes (producers that decode JPEG/PNG, gloo
scheduler ranks with continuous batching, encoder and prefill stand-ins), or through real
OpenAI-compatible servers given with --endpoint.

Reports TTFT mean/median/p90/p99, req/s, images/s, bytes moved (copy ledger) and A/B
deltas of each arm vs eager as signed percentages with intervals over forward batches.
Defaults fit the machine: the PR shape on a GPU (8 ranks, 200 requests, 1536x1024), a CPU
profile that finishes in a few minutes on 2 cores (2 ranks, 16 requests, 640x480). Sizes
are WIDTHxHEIGHT.

Real servers: --endpoint NAME=URL (repeatable) streams the same trace to each
OpenAI-compatible server; the arms are the names, each compared with the first; one
--endpoint is a plain benchmark. A request counts only when its stream finished
(finish_reason or [DONE]); HTTP errors, 429s (unless --retry-429), broken or truncated
streams and --request-timeout stalls are failed requests, counted per arm with the reason.

Exit codes: 0 every request of every arm completed (the comparison stands, significant or
not); 1 a failed request in any arm, a dead arm or an interrupted run (the report is
still written, with every arm run so far); 2 usage error; 3 report not written.

Example: kimi-bench serve-ab --request-rate 2,8,inf --num-prompts 120 --ranks 8
"""


def _options(values: dict[str, Any]) -> ServeOptions:
    from kimi_bench.bench.scenario import scenario_table

    table = scenario_table(values["scenario"], "serve_ab") if values.get("scenario") else {}
    opts = build(ServeOptions, {**table, **given(values, ServeOptions)})
    if opts.endpoints:  # the arms are the endpoints' names
        names = tuple(e.partition("=")[0] for e in opts.endpoints)
        opts = opts.model_copy(update={"arms": names})
    return opts


def _estimate_s(opts: ServeOptions) -> float:
    """Wall time of the whole command (``kimi_bench.bench.estimate.serve_s``, calibrated on the
    2-core CPU machine)."""
    from kimi_bench.bench.estimate import serve_s
    from kimi_bench.infra.environment import resolve_device

    return serve_s(opts, resolve_device(opts.device).type)


def _parse(
    values: dict[str, Any],
) -> tuple[ServeOptions, PreprocessConfig, World, Any, Path | None, OutputFormat | None]:
    """The options, the preprocessing config, the launcher's world, the device and the
    output folder and format (None on a torchrun rank that writes no report); a bad one is a
    usage error (exit 2)."""
    # options first, with no torch import: a usage error comes back at once
    from kimi_bench.bench.scenario import ScenarioError
    from kimi_bench.domain.config import ConfigError, resolve_config
    from kimi_bench.engine.launch import LaunchError, detect_world
    from kimi_bench.options import OptionsError, portrait_hint

    try:
        opts = _options(values)
        if hint := portrait_hint(opts.image_resolution):  # typed HEIGHTxWIDTH by habit?
            warn(hint, label="size:")
        cfg = resolve_config(opts.preset, opts.config)
        world = detect_world(opts.launcher)
        from kimi_bench.bench.serve_workload import custom_workload, requests_from_file
        from kimi_bench.engine.start import for_world  # imports torch
        from kimi_bench.infra.environment import resolve_device

        dev = resolve_device(opts.device)
        opts = for_world(opts, world)
        custom = custom_workload(opts) + (["--capacity"] if opts.capacity else [])
        if world.launcher == "torchrun" and custom:
            raise ValueError(f"{', '.join(custom)}: served through HTTP only, not under torchrun")
        opts = requests_from_file(opts)
        out_dir, fmt = resolve_output(values, "serve-ab") if world.writes_report else (None, None)
    except (OptionsError, ScenarioError, ConfigError, LaunchError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    return opts, cfg, world, dev, out_dir, fmt


def _body(values: dict[str, Any]) -> None:
    opts, cfg, world, dev, out_dir, fmt = _parse(values)
    from kimi_bench.bench.serve import ServeFailed, run_serve
    from kimi_bench.bench.serve_build import build_serve_report
    from kimi_bench.bench.serve_capacity import CapacitySearch, in_rate_order
    from kimi_bench.bench.serve_workload import prepare_workload
    from kimi_bench.infra.environment import host_load
    from kimi_bench.infra.limits import interrupt_reason
    from kimi_bench.options import rate_label, resolve_defaults
    from kimi_bench.report.emit import emit_serve
    from kimi_bench.report.view import view_of

    opts, profile = resolve_defaults(opts, "serve_ab", dev.type)
    try:  # every image read, every URL fetched: a bad workload stops here (exit 2)
        opts, work = prepare_workload(opts) if world.launcher != "torchrun" else (opts, None)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if not world.writes_report:  # a torchrun rank other than 0: its part, then exit
        try:
            run_serve(world, opts, cfg, dev.type)
        except ServeFailed as exc:
            fail_line(str(exc).splitlines()[0], label=f"rank {world.rank}:")
            raise typer.Exit(code=1) from None
        raise typer.Exit(code=0)
    assert out_dir is not None and fmt is not None
    folder: Path = out_dir
    load_start = host_load()
    search = CapacitySearch(opts) if opts.capacity else None
    total = len(opts.rates) * opts.repeats * len(opts.arms) if search is None else None
    _say_plan(opts, profile, total)
    error = None

    def write(runs: list[ServeRun], err: str | None, final: bool) -> tuple[Any, View, Any]:
        """The report of ``runs`` and its view (what the files and the terminal show, made
        once); a partial one during the run (the page only), else the final folder."""
        found, capacity = opts, None
        if search is not None and search.rates:  # the rates the search tried, ascending
            rates, runs = in_rate_order(search, runs)
            found, capacity = opts.model_copy(update={"rates": rates}), search.doc()
        report = build_serve_report(found, runs, dev, err, profile, load_start, work, capacity)
        view = view_of(report)

        def emit(d: Path) -> list[Path]:
            return emit_serve(report, d, figures=final, final=final, view=view)

        return report, view, write_report(emit, folder) if final else emit(folder)

    from kimi_bench.cli.progress import JobProgress

    with JobProgress("serve-ab", [("serve-ab", _estimate_s(opts))]) as progress:
        progress.part("serve-ab", total or 0, "pipelines")  # 0: --capacity, open-ended

        def on_run(runs: list[ServeRun]) -> None:
            last = runs[-1]
            progress.step(len(runs), item=f"{last.arm} @ {last.rate_label}")
            write(runs, None, final=False)  # partial results on disk after every pipeline

        try:
            runs = run_serve(world, opts, cfg, dev.type, on_run, folder / "servers", work, search)
        except ServeFailed as exc:
            runs, error = exc.runs, str(exc)
        except KeyboardInterrupt as exc:
            runs, error = [], interrupt_reason(exc)
    report, view, result = write(runs, error, final=True)
    written, out_dir = result.files, result.folder
    _show_results(view, fmt, written)
    verdict_lines(view.lines)
    jsonl = append_jsonl(values, report, out_dir)
    tried = sorted(search.rates) if search is not None and search.rates else opts.rates
    say(f"rates: {', '.join(rate_label(r) for r in tried)}; report: "
        f"{Path(out_dir) / 'report.json'}", err=True)  # fmt: skip
    code = 1 if error or report.summary["failed_requests"] else 0
    raise typer.Exit(code=max(code, result.exit_code, jsonl))


def _say_plan(opts: ServeOptions, profile: str, total: int | None) -> None:
    """The one dim line before the run: its shape, the defaults profile and the estimate."""
    w, h = opts.width_height
    if total is None:  # --capacity: as many runs as the bisection takes
        say(f"serve-ab --capacity: {len(opts.arms)} arms, {opts.requests} requests a rate, "
            f"rates {opts.capacity_min_rate:g}..{opts.capacity_max_rate:g} req/s bisected to "
            f"{opts.capacity_resolution:.0%}, {profile.upper()} defaults profile",
            style="dim", err=True)  # fmt: skip
        return
    say(
        f"serve-ab: {total} pipelines ({len(opts.rates)} rates x {len(opts.arms)} arms x "
        f"{opts.repeats} repeats), {opts.requests} requests each, {opts.ranks} ranks, {w}x{h} "
        f"(width x height), {profile.upper()} defaults profile; estimate ~"
        f"{_estimate_s(opts) / 60:.1f} min",
        style="dim",
        err=True,
    )


def _show_results(view: View, fmt: OutputFormat, written: Sequence[Path]) -> None:
    """The plot hint, the tables, the notes and the client warnings, on the terminal."""
    from kimi_bench.cli.tables import show_rendered
    from kimi_bench.report.figbase import PLOT_HINT

    if not any(p.suffix == ".png" for p in written):
        warn(PLOT_HINT, label="no plots:")
    shown = ("serve.capacity", "serve.per_rate", "serve.ab")
    show_rendered([r for r in view.rendered if r.table.key in shown], fmt)
    for line in view.data.get("notes") or []:
        note(line)
    for line in (view.data.get("summary") or {}).get("client_warnings", []):  # said twice
        warn(line, label="client:")


serve_ab = command(
    [
        *option_params(ServeOptions, skip=("standins",)),
        *option_params(ScenarioFileOptions),
        *output_params(),
    ],
    _body,
    DOC,
)
