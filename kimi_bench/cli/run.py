"""``kimi-bench run``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kimi_bench.cli.common import console, default_out, err_console, rich_table, usage_error


def run(
    scenario: Annotated[
        str, typer.Argument(help="Scenario: a built-in name or a TOML path.")
    ] = "default",
    out: Annotated[
        Path | None, typer.Option("--out", file_okay=False, help="Output folder.")
    ] = None,
) -> None:
    """The main job: parity on the built-in corpus, a small micro and a small serve-ab,
    then the gate, all into one folder with an index.md. Exit code is the gate's.

    Example: kimi-bench run --out kb-run
    """
    from kimi_bench.config import ConfigError
    from kimi_bench.gate import RulesError
    from kimi_bench.scenario import ScenarioError, load_scenario

    try:
        load_scenario(scenario)
    except (ScenarioError, ConfigError) as exc:
        raise usage_error(str(exc)) from None
    from kimi_bench.runner import run_scenario

    out_dir = out or default_out("run")
    try:
        results, _ = run_scenario(
            scenario, out_dir, say=lambda m: err_console.print(f"[bold]>[/] {m}")
        )
    except (RulesError, ScenarioError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    rows = [r.as_dict() for r in results]
    console.print(rich_table("gate", rows, ["report", "rule", "measured", "verdict", "reason"]))
    failed = any(r.verdict == "fail" for r in results)
    console.print(
        f"[{'bold red' if failed else 'bold green'}]gate {'FAIL' if failed else 'PASS'}[/]"
        f"  index: {out_dir / 'index.md'}"
    )
    raise typer.Exit(code=1 if failed else 0)
