"""``kimi-bench gate`` and ``kimi-bench compare``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import err_console, note, stdout_is_document, usage_error, verdict_lines
from kimi_bench.options import CompareOptions, GateCommandOptions


def _optional_file(value: str | None, option: str) -> Path | None:
    """An output file option; an empty value (``--summary "$GITHUB_STEP_SUMMARY"`` with the
    variable unset) means "not given", with a note, instead of the current folder."""
    if value is None:
        return None
    if not value.strip():
        note(f"{option} is empty (an unset variable?): nothing written there")
        return None
    return Path(value)


def _load_all(paths: list[Path]) -> list[Any]:
    """Reports from files or folders (a folder may hold report.json or sub-folders; the
    search stays inside it, skips links and special files, and is bounded)."""
    from kimi_bench.ci.gate import GATED_KINDS
    from kimi_bench.report.files import REPORT_NAMES
    from kimi_bench.report.model import ReportError, find_report_files, load_report

    reports = []
    for p in paths:
        if p.is_dir() and not any((p / n).exists() for n in REPORT_NAMES):
            found = find_report_files(p)
            if not found:
                raise ReportError(f"no report.json under {p}")
            reports += [load_report(f, kinds=GATED_KINDS) for f in found]
        else:
            reports.append(load_report(p, kinds=GATED_KINDS))
    return reports


GATE_DOC = """Pass or fail reports against rules, for CI.

Every gated figure is recomputed from the report's raw data (repeats, request rows);
a report whose summary disagrees with it, or whose numbers are negative or not finite,
is refused (exit 2). A run that did not complete (a planned repeat or request missing,
an error, not marked final) always fails (rule <kind>.complete). A rule whose interval
straddles its threshold is "inconclusive" (the rules' inconclusive policy: warn or
fail). A gate that evaluates no rule of the rules file fails.

No silent pass: when every regression (baseline) rule was skipped because no comparable
baseline was found (none given and none of this setup under reports/baselines/<device>/),
the verdict says "NO REGRESSION CHECK" and why (what was searched, what came closest) and
the exit code is 5; --allow-no-baseline accepts it (exit 0, the verdict still says no
regression check was made). A --history too short for a change point passes, saying how
many more runs it needs. A baseline made with the other eager arm (--eager-baseline) is not
comparable (a --baseline of it: exit 2) unless --allow-eager-baseline-mismatch, which
names it in each rule's reason. A baseline measured on a busy host is named in the verdict.
A metric that moves with the eager arm too (micro.speedup, over_yardstick) does not fail
when the eager arm got faster and the measured arm itself did not get slower: a faster
eager arm is not a regression of the deferred one.

Exit codes: 0 every rule passes (skips and inconclusive-warn allowed), 1 a rule fails
or nothing was checked, 2 unusable input (missing file, not a report, unknown kind, a
field of the wrong type, a summary that disagrees with its raw data, schema newer than
this kimi-bench, a --baseline that is missing, unreadable, the report itself, of
another kind or of another setup, an invalid rules file or history), 3 the verdict
stands but --junit/--summary could not be written (see the message), 5 no rule failed
but no regression check was made: every baseline rule was skipped for want of a
comparable baseline (--allow-no-baseline accepts it).

Example: kimi-bench gate out/parity out/micro --rules gate --junit gate.xml
"""


def _gate(opts: GateCommandOptions, _: dict[str, Any]) -> None:
    from kimi_bench.bench.scenario import ScenarioError, resolve_path
    from kimi_bench.ci.gate import Allow, RulesError, load_rules, run_gate
    from kimi_bench.ci.history import HistoryError, load_history
    from kimi_bench.cli.output import user_file
    from kimi_bench.cli.tables import show_tables
    from kimi_bench.report.junit import junit_xml
    from kimi_bench.report.model import ReportError
    from kimi_bench.report.output import OutputError, check_output_file
    from kimi_bench.report.writers import markdown_table

    reports, rules, history = list(opts.reports), opts.rules, opts.history
    stdout_is_document(opts.format == "json")
    baseline = Path(opts.baseline) if opts.baseline is not None else None
    junit = _optional_file(opts.junit, "--junit")
    summary = _optional_file(opts.summary, "--summary")
    try:
        if not reports and history is None:
            raise ReportError("give report.json files or folders, or --history FILE")
        for path, option in ((junit, "--junit"), (summary, "--summary")):
            if path is not None:
                check_output_file(path, option)
        # an existing path is read as given (load_rules names a FIFO, a folder...)
        rule_set = load_rules(Path(rules) if os.path.lexists(rules) else resolve_path(rules))
        loaded = _load_all(reports or [])
        lines = load_history(history) if history is not None else None
        allow = Allow(opts.allow_no_baseline, opts.allow_eager_baseline_mismatch)
        outcome = run_gate(loaded, rule_set, baseline, lines, allow)
    except (ReportError, RulesError, ScenarioError, OutputError, HistoryError) as exc:
        raise usage_error(str(exc)) from None
    rows = [r.as_dict() for r in outcome.results]
    show_tables([("gate", rows, ["report", "rule", "measured", "verdict", "reason"])], opts.format)
    code, written = outcome.exit_code, 0
    if junit:
        written = max(written, user_file(junit, junit_xml(outcome.results), "--junit"))
    if summary:
        text = f"## kimi-bench {outcome.verdict()}\n\n" + markdown_table(rows) + "\n"
        written = max(written, user_file(summary, text, "--summary"))
    code = written or code  # 3 (a file not written) stands over the verdict's code, as before
    verdict_lines([outcome.line()])
    raise typer.Exit(code=code)


COMPARE_DOC = """Two reports of the same kind side by side: medians, relative delta (B vs A) and a
two-sided Mann-Whitney p-value on the raw samples.

Exit codes: 0 compared, 2 unusable input (as for gate), 3 --markdown not written.

Example: kimi-bench compare reports/examples/cpu-run/micro out/micro
"""


def _compare(opts: CompareOptions, _: dict[str, Any]) -> None:
    from kimi_bench.ci.compare import compare_reports
    from kimi_bench.ci.gate import GATED_KINDS
    from kimi_bench.cli.output import user_file
    from kimi_bench.cli.tables import show_tables
    from kimi_bench.report.model import ReportError, load_report
    from kimi_bench.report.output import OutputError, check_output_file
    from kimi_bench.report.writers import markdown_table, md_text

    a, b = opts.a, opts.b
    stdout_is_document(opts.format == "json")
    markdown = _optional_file(opts.markdown, "--markdown")
    try:
        if markdown is not None:
            check_output_file(markdown, "--markdown")
        ra, rb = load_report(a, kinds=GATED_KINDS), load_report(b, kinds=GATED_KINDS)
        rows, diffs = compare_reports(ra, rb)
    except (ReportError, OutputError) as exc:
        raise usage_error(str(exc)) from None
    cols = list(rows[0]) if rows else []
    show_tables([(f"compare {ra.kind}: A={a}  B={b}", rows, cols)], opts.format)
    for d in diffs:
        label = "not comparable:" if d.hard else "note:"
        err_console.print(f"{label} {d.what} differs: A {d.a!r}, B {d.b!r}", markup=False)
    if any(d.hard for d in diffs):
        err_console.print(
            "the two runs differ in device or setup: no delta is called significant",
            markup=False,
        )
    if markdown:
        text = f"# compare {ra.kind}\n\nA: {md_text(a)}\n\nB: {md_text(b)}\n\n" + markdown_table(
            rows, cols
        )
        code = user_file(markdown, text, "--markdown")
        if code:
            raise typer.Exit(code=code)


gate = model_command(GateCommandOptions, _gate, GATE_DOC)


compare = model_command(CompareOptions, _compare, COMPARE_DOC)
