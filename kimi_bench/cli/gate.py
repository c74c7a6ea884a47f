"""``kimi-bench gate`` and ``kimi-bench compare``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from kimi_bench.cli.common import console, err_console, show_tables, usage_error


def _load_all(paths: list[Path]) -> list[Any]:
    """Reports from files or folders (a folder may hold report.json or sub-folders; the
    search stays inside it, skips links and special files, and is bounded)."""
    from kimi_bench.gate import GATED_KINDS
    from kimi_bench.report.model import ReportError, find_report_files, load_report

    reports = []
    for p in paths:
        if p.is_dir() and not (p / "report.json").exists():
            found = find_report_files(p)
            if not found:
                raise ReportError(f"no report.json under {p}")
            reports += [load_report(f, kinds=GATED_KINDS) for f in found]
        else:
            reports.append(load_report(p, kinds=GATED_KINDS))
    return reports


def gate(
    reports: Annotated[list[Path], typer.Argument(help="report.json files or folders.")],
    rules: Annotated[
        str,
        typer.Option("--rules", help="Rules TOML: a path or a built-in name (gate, gate-h200)."),
    ] = "gate",
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="Baseline report or folder (default: reports/baselines/<device>/ when present).",
        ),
    ] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")] = None,
    summary: Annotated[
        Path | None,
        typer.Option("--summary", help="Write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)."),
    ] = None,
) -> None:
    """Pass or fail reports against rules, for CI.

    A report whose run stopped early or errored always fails (rule <kind>.complete).
    Exit codes: 0 every rule passes (skips allowed), 1 a rule fails, 2 unusable input
    (missing file, not a report, unknown kind, a field of the wrong type, schema newer
    than this kimi-bench, a --baseline that is missing, unreadable or the report itself,
    an unknown rule or metric, an output file that cannot be written), 3 the verdict
    stands but --junit/--summary could not be written (see the message).

    Example: kimi-bench gate out/parity out/micro --rules gate --junit gate.xml
    """
    from kimi_bench.gate import RulesError, default_baseline_dir, evaluate, load_rules
    from kimi_bench.report.junit import junit_xml
    from kimi_bench.report.model import ReportError
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE, OutputError, check_output_file
    from kimi_bench.report.writers import atomic_write_text, markdown_table
    from kimi_bench.scenario import ScenarioError, resolve_path

    try:
        for path, option in ((junit, "--junit"), (summary, "--summary")):
            if path is not None:
                check_output_file(path, option)
        loaded = _load_all(reports)
        # an existing path is read as given (load_rules names a FIFO, a folder...)
        rule_set = load_rules(Path(rules) if os.path.lexists(rules) else resolve_path(rules))
        results = []
        for rep in loaded:
            base = baseline or default_baseline_dir(rep)
            results += evaluate([rep], rule_set, base, baseline_required=baseline is not None)
    except (ReportError, RulesError, ScenarioError, OutputError) as exc:
        raise usage_error(str(exc)) from None
    rows = [r.as_dict() for r in results]
    show_tables([("gate", rows, ["report", "rule", "measured", "verdict", "reason"])])
    failed = [r for r in results if r.verdict == "fail"]
    code = 1 if failed else 0
    try:
        if junit:
            atomic_write_text(junit, junit_xml(rows))
        if summary:
            head = "FAIL" if failed else "PASS"
            atomic_write_text(
                summary, f"## kimi-bench gate: {head}\n\n" + markdown_table(rows) + "\n"
            )
    except OSError as exc:
        err_console.print(f"[bold red]error:[/] could not write gate output: {exc}")
        code = max(code, EXIT_OUTPUT_INCOMPLETE)
    if not results:
        err_console.print("[yellow]no rule applied to these reports[/]")
    verdict = f"FAIL: {len(failed)} of {len(results)} rules" if failed else "PASS"
    console.print(f"[{'bold red' if failed else 'bold green'}]gate {verdict}[/]")
    raise typer.Exit(code=code)


def compare(
    a: Annotated[Path, typer.Argument(help="Report A (the reference).")],
    b: Annotated[Path, typer.Argument(help="Report B (the candidate).")],
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the table as Markdown here.")
    ] = None,
) -> None:
    """Two reports of the same kind side by side: medians, relative delta (B vs A) and a
    two-sided Mann-Whitney p-value on the raw samples.

    Exit codes: 0 compared, 2 unusable input (as for gate), 3 --markdown not written.

    Example: kimi-bench compare reports/baselines/h200/micro/r8-shm runs/new-micro
    """
    from kimi_bench.compare import compare_reports
    from kimi_bench.gate import GATED_KINDS
    from kimi_bench.report.model import ReportError, load_report
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE, OutputError, check_output_file
    from kimi_bench.report.writers import atomic_write_text, markdown_table, md_text

    try:
        if markdown is not None:
            check_output_file(markdown, "--markdown")
        ra, rb = load_report(a, kinds=GATED_KINDS), load_report(b, kinds=GATED_KINDS)
        rows = compare_reports(ra, rb)
    except (ReportError, OutputError) as exc:
        raise usage_error(str(exc)) from None
    cols = list(rows[0]) if rows else []
    show_tables([(f"compare {ra.kind}: A={a}  B={b}", rows, cols)])
    if markdown:
        text = f"# compare {ra.kind}\n\nA: {md_text(a)}\n\nB: {md_text(b)}\n\n" + markdown_table(
            rows, cols
        )
        try:
            atomic_write_text(markdown, text)
        except OSError as exc:
            err_console.print(f"[bold red]error:[/] could not write {markdown}: {exc}")
            raise typer.Exit(code=EXIT_OUTPUT_INCOMPLETE) from None
