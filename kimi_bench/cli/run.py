"""``kimi-bench run``."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import typer

from kimi_bench.cli.build import command
from kimi_bench.cli.common import (
    append_jsonl,
    output_params,
    resolve_output,
    say,
    show_tables,
    usage_error,
    verdict_line,
)

DOC = """The main job: parity on the built-in corpus, a small micro (all arms) and a small
serve-ab, then the gate, all into one folder with index.md and a self-contained
index.html. Exit code is the gate's. --append-jsonl writes one line per part (parity,
micro, serve-ab), each as the single command would.

The scenario (a built-in name such as default, or a TOML path) holds one table per part;
its keys are the options of the single commands, validated by the same typed models
(unknown keys are errors). --seed and --device apply to every part.

Example: kimi-bench run --device cpu --output-dir kb-run
"""


def _params() -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    scenario = typer.Option("--scenario", help="Scenario: a built-in name or a TOML path "
                            "\\[default: default].", show_default=False)  # fmt: skip
    seed = typer.Option("--seed", help="Seed for every part (overrides the scenario).",
                        show_default=False)  # fmt: skip
    device = typer.Option("--device", help="auto, cpu or cuda for every part (overrides the "
                          "scenario).", show_default=False)  # fmt: skip
    return [
        inspect.Parameter("scenario", kw, default=None, annotation=Annotated[str | None, scenario]),
        inspect.Parameter("seed", kw, default=None, annotation=Annotated[int | None, seed]),
        inspect.Parameter("device", kw, default=None, annotation=Annotated[str | None, device]),
        *output_params(),
    ]


def _body(values: dict[str, Any]) -> None:
    from kimi_bench.ci.gate import RulesError
    from kimi_bench.config import ConfigError
    from kimi_bench.options import OptionsError
    from kimi_bench.scenario import ScenarioError, load_scenario, with_overrides

    try:
        sc = with_overrides(load_scenario(values.get("scenario") or "default"), values)
        out_dir, fmt = resolve_output(values, "run")
    except (ScenarioError, ConfigError, OptionsError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    from kimi_bench.runner import FOLDER, run_scenario

    try:
        results, reports = run_scenario(sc, out_dir, say=lambda m: say(m, label=">", err=True))
    except (RulesError, ScenarioError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    for rep in reports:  # --append-jsonl: one line per part, as each single command writes
        append_jsonl(values, rep, out_dir / FOLDER[rep.kind])
    rows = [r.as_dict() for r in results]
    show_tables([("gate", rows, ["report", "rule", "measured", "verdict", "reason"])], fmt)
    failed = any(r.verdict == "fail" for r in results)
    verdict_line(f"gate {'FAIL' if failed else 'PASS'}", not failed)
    say(f"index: {out_dir / 'index.md'} and {out_dir / 'index.html'}", err=True)
    raise typer.Exit(code=1 if failed else 0)


run = command(_params(), _body, DOC)
