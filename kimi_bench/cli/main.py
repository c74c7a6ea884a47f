"""Entry point: ``kimi-bench <command>``."""

from __future__ import annotations

from typing import Annotated

import typer

from kimi_bench.cli.calibrate import calibrate
from kimi_bench.cli.common import package_version, say
from kimi_bench.cli.gate import compare, gate
from kimi_bench.cli.import_cmd import import_results
from kimi_bench.cli.micro import micro
from kimi_bench.cli.parity import parity
from kimi_bench.cli.project import project
from kimi_bench.cli.render import render
from kimi_bench.cli.run import run
from kimi_bench.cli.serve import serve_ab
from kimi_bench.cli.serve_server import serve_server

app = typer.Typer(
    name="kimi-bench",
    help="Validate and benchmark deferred (raw uint8) image preprocessing for multimodal "
    "LLM serving: bit-exactness (parity), stage-by-stage cost (micro), serving A/B "
    "(serve-ab) and CI gating (gate, compare, run).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        say(f"kimi-bench {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the kimi-bench version and exit.",
        ),
    ] = False,
) -> None:
    """kimi-bench: is the deferred path bit-exact, what does it save, does it regress?"""


app.command("parity")(parity)
app.command("micro")(micro)
app.command("serve-ab")(serve_ab)
app.command("serve")(serve_server)
app.command("gate")(gate)
app.command("compare")(compare)
app.command("calibrate")(calibrate)
app.command("run")(run)
app.command("project")(project)
app.command("render")(render)
app.command("import")(import_results)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
