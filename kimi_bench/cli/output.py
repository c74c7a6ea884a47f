"""Where a measuring command writes: the output folder it claims (one run at a time), the
fallback when writing fails at the end, and the ``--append-jsonl`` history line."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import typer

from kimi_bench.cli.common import OutputFormat, fail_line, stdout_is_document, warn

# report.output is imported inside the functions that write: importing the report package
# costs every command's start-up (--help, usage errors) a third of a second.
__all__ = ["release_claims", "resolve_output", "write_report"]


def release_claims() -> None:
    """``report.output.release_claims``: drop the holds of earlier commands run in this
    process. A folder is only ever held through report.output, so while that module is not
    imported there is nothing to release (and it is not imported for it)."""
    output = sys.modules.get("kimi_bench.report.output")
    if output is not None:
        output.release_claims()


def default_out(kind: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / "runs" / f"{kind}-{stamp}"


def append_jsonl(values: dict[str, Any], report: Any, out_dir: Path) -> int:
    """``--append-jsonl FILE``: one JSON line per run (the summary without bulky lists).
    Returns the exit code it adds: 0 written (or not asked for), 3 not written (said)."""
    path = values.get("append_jsonl")
    if not path:
        return 0
    env = report.environment
    line = {
        "kind": report.kind,
        "created": env.get("created"),
        "git": (env.get("git") or {}).get("commit"),
        "device": env.get("device_name"),
        "report": str(out_dir / "report.json"),
        "metadata": env.get("metadata") or {},
        **{k: v for k, v in report.summary.items() if not isinstance(v, (list, dict))},
    }
    text = json.dumps(line, default=str) + "\n"
    return user_file(Path(path), text, "--append-jsonl", append=True)


def user_file(path: Path, data: str | bytes, option: str, *, append: bool = False) -> int:
    """Write a file the user named with ``option``; 0 when written, else the failure is
    printed (naming the path) and EXIT_OUTPUT_INCOMPLETE (3) returned for the exit code."""
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE, WriteFailed, write_file

    try:
        write_file(path, data, option, append=append)
    except WriteFailed as exc:
        fail_line(str(exc))
        return EXIT_OUTPUT_INCOMPLETE
    return 0


def resolve_output(values: dict[str, Any], kind: str) -> tuple[Path, OutputFormat]:
    """The output folder (checked writable before any work) and the console format."""
    from kimi_bench.report.output import check_output_file, claim_default, claim_output

    try:
        fmt = OutputFormat(values.get("format") or "table")
    except ValueError:
        raise ValueError("--format must be table, md or json") from None
    stdout_is_document(fmt is OutputFormat.json)
    if values.get("append_jsonl"):  # a folder or an unwritable place: refused before the work
        check_output_file(Path(values["append_jsonl"]), "--append-jsonl")
    given, fallback = values.get("out"), default_out(kind)
    if given:
        claim_output(given, overwrite=bool(values.get("overwrite")))
        return given, fmt
    return claim_default(fallback), fmt


def write_report(write: Any, out_dir: Path) -> Any:
    """Write a report folder; if that fails at the end, into a printed fallback folder
    (exit code 3 then says the output is not where it was asked for)."""
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE, OutputError, write_outputs

    try:
        result = write_outputs(write, out_dir)
    except OutputError as exc:
        fail_line(str(exc))
        raise typer.Exit(code=EXIT_OUTPUT_INCOMPLETE) from None
    if result.fallback:
        warn(f"could not write {result.error}; the report is in {result.folder}")
    return result
