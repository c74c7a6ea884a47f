"""``kimi-bench run``."""

from __future__ import annotations

from typing import Any

import typer

from kimi_bench.cli.build import model_command, output_params
from kimi_bench.cli.common import say, usage_error, verdict_lines, warn
from kimi_bench.cli.output import append_jsonl, resolve_output
from kimi_bench.options import RunCommandOptions, RunOutputOptions

DOC = """The main job: parity on the built-in corpus, a small micro (all arms) and a small
serve-ab, then the gate, all into one folder with index.md and a self-contained
index.html. Exit code is the gate's (see kimi-bench gate --help: 0 pass, 1 a rule failed,
5 no regression check made and not accepted). --append-jsonl writes one line per part
(parity, micro, serve-ab), each as the single command would.

A run accepts that no comparable baseline is found ([gate] allow_no_baseline, true by
default: no baseline ships for CPU machines, and a run from another machine is not
comparable): its gate line then says "gate PASS with no regression check" and why. Give
[gate] baseline (a run of the same setup on this machine) for a regression check; with
[gate] allow_no_baseline = false a run that finds no baseline exits 5.

The scenario (a built-in name such as default, or a TOML path) holds one table per part;
its keys are the options of the single commands, validated by the same typed models
(unknown keys are errors). --seed and --device apply to every part.

Example: kimi-bench run --device cpu --output-dir kb-run
"""


def _body(opts: RunCommandOptions, values: dict[str, Any]) -> None:
    # the scenario first, with no torch import: a usage error comes back at once
    from kimi_bench.bench.scenario import ScenarioError, load_scenario, with_overrides
    from kimi_bench.domain.config import ConfigError
    from kimi_bench.options import OptionsError

    try:
        sc = with_overrides(load_scenario(opts.scenario), opts.model_dump(exclude_none=True))
        out_dir, fmt = resolve_output(values, "run")
    except (ScenarioError, ConfigError, OptionsError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    from kimi_bench.options import portrait_hint

    if sc.serve_ab is not None and (hint := portrait_hint(sc.serve_ab.image_resolution)):
        warn(hint.replace("--image-resolution", "[serve_ab] image_resolution"), label="size:")
    from kimi_bench.bench.estimate import CPU, busy_note, run_parts
    from kimi_bench.bench.runner import FOLDER, run_scenario
    from kimi_bench.bench.scenario import resolve_path
    from kimi_bench.ci.gate import RulesError, load_rules
    from kimi_bench.cli.progress import JobProgress, fmt_duration
    from kimi_bench.infra.environment import resolve_device

    try:
        load_rules(resolve_path(sc.gate.rules))  # a bad rule set is found before the parts run
        parts = run_parts(sc, resolve_device(sc.device).type)
        say(
            f"run: {', '.join(p for p, _ in parts)}; estimate ~"
            f"{fmt_duration(sum(s for _, s in parts) + CPU['import_s'])}" + busy_note(2),
            style="dim",
            err=True,
        )
        with JobProgress("run", parts) as progress:
            results, reports = run_scenario(
                sc, out_dir, say=lambda m: say(m, label=">", err=True), progress=progress
            )
    except (RulesError, ScenarioError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    jsonl = 0
    for rep in reports:  # --append-jsonl: one line per part, as each single command writes
        jsonl = max(jsonl, append_jsonl(values, rep, out_dir / FOLDER[rep.kind]))
    code = _verdicts(results, reports, fmt, out_dir)
    say(f"index: {out_dir / 'index.md'} and {out_dir / 'index.html'}", err=True)
    raise typer.Exit(code=max(code, jsonl))


def _verdicts(results: list[Any], reports: list[Any], fmt: Any, out_dir: Any) -> int:
    """The end of a run on the terminal: the rules failed or inconclusive (``--format json``:
    every rule, as the one document on stdout), then each part's verdict lines and the
    gate's, as index.html shows them. The gate's exit code."""
    from kimi_bench.ci.gate import GateOutcome
    from kimi_bench.cli.common import OutputFormat
    from kimi_bench.cli.tables import show_tables
    from kimi_bench.report import verdicts

    rows = [r.as_dict() for r in results]
    cols = ["report", "rule", "measured", "verdict", "reason"]
    notable = [r for r in rows if r["verdict"] in ("fail", "inconclusive")]
    shown = rows if fmt is OutputFormat.json else notable
    if shown:
        title = "gate" if fmt is OutputFormat.json else "gate: rules failed or inconclusive"
        show_tables([(title, shown, cols)], fmt)
    for rep in reports:
        say(f"{rep.kind}:", style="bold")
        verdict_lines(verdicts.lines(rep.to_dict()))
    outcome = GateOutcome(list(results))
    verdict_lines([outcome.line()])
    say(f"every rule: {out_dir / 'gate.md'}", err=True)
    return outcome.exit_code


run = model_command(RunCommandOptions, _body, DOC, output_params(RunOutputOptions))
