"""``kimi-bench gate`` and ``kimi-bench compare``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kimi_bench.cli.common import console, err_console, rich_table, usage_error


def _load_all(paths: list[Path]) -> list[Any]:
    """Reports from files or folders (a folder may hold report.json or sub-folders)."""
    from kimi_bench.report.model import ReportError, load_report

    reports = []
    for p in paths:
        if p.is_dir() and not (p / "report.json").exists():
            found = sorted(p.rglob("report.json"))
            if not found:
                raise ReportError(f"no report.json under {p}")
            reports += [load_report(f) for f in found]
        else:
            reports.append(load_report(p))
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

    Exit codes: 0 every rule passes (skips allowed), 1 a rule fails, 2 unusable input
    (missing file, not a report, unknown kind, schema newer than this kimi-bench).

    Example: kimi-bench gate out/parity out/micro --rules gate --junit gate.xml
    """
    from kimi_bench.gate import RulesError, default_baseline_dir, evaluate, load_rules
    from kimi_bench.report.junit import write_junit
    from kimi_bench.report.model import ReportError
    from kimi_bench.report.writers import markdown_table
    from kimi_bench.scenario import ScenarioError, resolve_path

    try:
        loaded = _load_all(reports)
        rule_set = load_rules(resolve_path(rules))
    except (ReportError, RulesError, ScenarioError) as exc:
        raise usage_error(str(exc)) from None
    results = []
    for rep in loaded:
        base = baseline or default_baseline_dir(rep)
        results += evaluate([rep], rule_set, base)
    rows = [r.as_dict() for r in results]
    console.print(rich_table("gate", rows, ["report", "rule", "measured", "verdict", "reason"]))
    failed = [r for r in results if r.verdict == "fail"]
    if junit:
        write_junit(rows, junit)
    if summary:
        head = "FAIL" if failed else "PASS"
        summary.write_text(f"## kimi-bench gate: {head}\n\n" + markdown_table(rows) + "\n")
    if not results:
        err_console.print("[yellow]no rule applied to these reports[/]")
    verdict = f"FAIL: {len(failed)} of {len(results)} rules" if failed else "PASS"
    console.print(f"[{'bold red' if failed else 'bold green'}]gate {verdict}[/]")
    raise typer.Exit(code=1 if failed else 0)


def compare(
    a: Annotated[Path, typer.Argument(help="Report A (the reference).")],
    b: Annotated[Path, typer.Argument(help="Report B (the candidate).")],
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the table as Markdown here.")
    ] = None,
) -> None:
    """Two reports of the same kind side by side: medians, relative delta (B vs A) and a
    two-sided Mann-Whitney p-value on the raw samples.

    Example: kimi-bench compare reports/baselines/h200/micro/r8-shm runs/new-micro
    """
    from kimi_bench.compare import compare_reports
    from kimi_bench.report.model import ReportError, load_report
    from kimi_bench.report.writers import markdown_table

    try:
        ra, rb = load_report(a), load_report(b)
        rows = compare_reports(ra, rb)
    except ReportError as exc:
        raise usage_error(str(exc)) from None
    cols = list(rows[0]) if rows else []
    console.print(rich_table(f"compare {ra.kind}: A={a}  B={b}", rows, cols))
    if markdown:
        markdown.write_text(
            f"# compare {ra.kind}\n\nA: `{a}`\n\nB: `{b}`\n\n" + markdown_table(rows, cols)
        )
