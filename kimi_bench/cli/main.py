"""Entry point: ``kimi-bench <command>``."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from typing import Annotated, Any

import typer

from kimi_bench.cli.ab import ab
from kimi_bench.cli.calibrate import calibrate
from kimi_bench.cli.common import package_version, say, stdout_is_document
from kimi_bench.cli.gate import compare, gate
from kimi_bench.cli.import_cmd import import_results
from kimi_bench.cli.micro import micro
from kimi_bench.cli.output import release_claims
from kimi_bench.cli.parity import parity
from kimi_bench.cli.project import project
from kimi_bench.cli.render import render
from kimi_bench.cli.run import run
from kimi_bench.cli.serve import serve_ab
from kimi_bench.cli.serve_server import serve_from_options, serve_server
from kimi_bench.options import SERVE_FROM_OPTIONS

EXIT_INTERNAL_ERROR = 4
INTERNAL_EPILOG = (
    "Exit code 4: an internal error (a bug in kimi-bench, never a measured result); one "
    "line on stderr names the exception and the file that holds the full traceback."
)


def internal_error(exc: BaseException) -> int:
    """Report an unexpected exception as one line on stderr, the traceback in a file;
    returns the exit code (4), distinct from 1 (a difference was found)."""
    text = "".join(traceback.format_exception(exc))
    where = "not written"
    try:
        fd, name = tempfile.mkstemp(prefix="kimi-bench-crash-", suffix=".txt")
        # argv may hold bytes that are not UTF-8 (kept as surrogates): escaped, never fatal
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            argv = (os.fsencode(a).decode("utf-8", "backslashreplace") for a in sys.argv)
            fh.write(f"kimi-bench {package_version()}: {' '.join(argv)}\n{text}")
        where = name
    except OSError as err:  # no temp folder: the traceback on stderr is all there is
        sys.stderr.write(text)
        where = f"not written ({err.strerror or err})"
    first = (str(exc).splitlines() or [""])[0]
    say(
        f"{type(exc).__name__}: {first} (a bug in kimi-bench, exit code "
        f"{EXIT_INTERNAL_ERROR}); traceback: {where}",
        label="internal error:",
        label_style="bold red",
        err=True,
    )
    return EXIT_INTERNAL_ERROR


class _App(typer.Typer):
    """The CLI; an exception no command handles exits 4 with one line, not a traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except Exception as exc:  # the last resort: every expected error is handled earlier
            raise SystemExit(internal_error(exc)) from None


app = _App(
    name="kimi-bench",
    help="Validate and benchmark deferred (raw uint8) image preprocessing for multimodal "
    "LLM serving: bit-exactness (parity), stage-by-stage cost (micro), serving A/B "
    "(serve-ab) and CI gating (gate, compare, run).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # plain (click) help: text is printed literally ("[default: 4]", "[serve_ab]" stay as
    # written) and option names are never cut at 80 columns; Rich markup would eat
    # bracketed text and its option table truncates long aliases.
    rich_markup_mode=None,
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
    stdout_is_document(False)  # a command with --format json claims stdout for itself
    release_claims()  # output folders held by an earlier command in this process


app.command("parity", epilog=INTERNAL_EPILOG)(parity)
app.command("micro", epilog=INTERNAL_EPILOG)(micro)
app.command("serve-ab", epilog=INTERNAL_EPILOG)(serve_ab)
app.command("serve", epilog=INTERNAL_EPILOG)(serve_server)
app.command(SERVE_FROM_OPTIONS, hidden=True)(serve_from_options)
app.command("gate", epilog=INTERNAL_EPILOG)(gate)
app.command("compare", epilog=INTERNAL_EPILOG)(compare)
app.command("calibrate", epilog=INTERNAL_EPILOG)(calibrate)
app.command("ab", epilog=INTERNAL_EPILOG)(ab)
app.command("run", epilog=INTERNAL_EPILOG)(run)
app.command("project", epilog=INTERNAL_EPILOG)(project)
app.command("render", epilog=INTERNAL_EPILOG)(render)
app.command("import", epilog=INTERNAL_EPILOG)(import_results)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
