"""``kimi-bench ab``: options from ``options.AbOptions``, the work in ``ci.ab``."""

from __future__ import annotations

from typing import Any

import typer

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import fail_line, say, usage_error, verdict_line
from kimi_bench.options.ab import AbOptions

DOC = """Did the candidate revision regress against the base, measured on THIS machine?

Runs each revision's micro (arms eager and deferred) as separate process launches,
interleaved A B, B A, A B, ... (--launches per revision; while a metric is inconclusive,
one more pair at a time up to --max-launches), so host drift hits both; gates
the candidate's change over the launch pairs: the deferred arm's time and its speedup over
eager (eager measured in the same launch), a launch's figure for an arm being its fastest
measured repeat (--figure min: other work on the host only ever adds time) or its median.
The interval is a paired t interval of the per-pair log ratios (scipy.stats.ttest_1samp).
A metric fails when the
candidate is worse by more than --max-regression AND the interval excludes no change.

A revision is a git ref of --repo (exported and installed into its own virtual
environment that reuses this interpreter's packages, torch included; cached by commit
under --cache) or an installed kimi-bench executable (a path, or a name on PATH). The same
value twice is an A/A run. Writes report.md and report.json (both commits, the machine,
the host load, every launch's figures) and each launch's micro report under launches/.

Exit codes: 0 no regression (PASS), 1 a regression (FAIL, the metric named) or a
candidate launch that failed, 2 refused (unknown ref, missing executable, one that does
not answer --version as kimi-bench, a failed build, invalid options, a base launch that
failed, an output folder in use).

Example: kimi-bench ab --base origin/main --candidate HEAD --launches 6 --max-regression 0.10
"""


class _Progress:
    """One line per finished launch, with the time the rest should take at this pace."""

    def __init__(self) -> None:
        self.spent = 0.0

    def __call__(self, launch: Any, total: int) -> None:
        from kimi_bench.cli.progress import fmt_duration

        self.spent += launch.wall_s
        done = launch.position + 1
        left = self.spent / done * (total - done)
        say(
            f"[{done}/{total}] {launch.side}: deferred {launch.deferred_ms:.2f} ms, eager "
            f"{launch.eager_ms:.2f} ms, speedup {launch.speedup:.2f}x ({launch.wall_s:.0f} s; "
            f"about {fmt_duration(left)} left)",
            style="dim",
            err=True,
        )


def _ab(opts: AbOptions, values: dict[str, Any]) -> None:
    from kimi_bench.ci import ab_report
    from kimi_bench.ci.ab import LaunchFailed, resolve_both, run_ab
    from kimi_bench.ci.revisions import RevisionError
    from kimi_bench.cli.output import resolve_output
    from kimi_bench.report.output import OutputError

    try:
        out, _ = resolve_output({"out": opts.out, "overwrite": opts.overwrite}, "ab")
        say(f"ab: resolving --base {opts.base} and --candidate {opts.candidate}", err=True)
        base, cand = resolve_both(opts)
    except (RevisionError, OutputError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    say(f"base: {base.version} ({base.source} {base.given}); candidate: {cand.version} "
        f"({cand.source} {cand.given}); {2 * opts.launches} launches (up to "
        f"{2 * opts.launch_cap} while a metric is inconclusive)", err=True)  # fmt: skip
    try:
        doc = run_ab(opts, base, cand, out, _Progress())
    except LaunchFailed as exc:
        fail_line(str(exc), label="launch failed:")
        raise typer.Exit(code=1 if exc.side == "candidate" else 2) from None
    ab_report.write(doc, out)
    for m in doc.metrics:
        say(m.sentence, err=True)
    say(f"report: {out / 'report.md'}", err=True)
    failed = ", ".join(doc.failed_metrics)
    open_ = ", ".join(m.metric for m in doc.metrics if m.verdict == "inconclusive")
    tail = f": regression in {failed}" if failed else ""
    if open_ and not failed:
        tail = f" (inconclusive: {open_} after {len(doc.launches) // 2} launch pairs; more "
        "--max-launches would decide)"
    verdict_line(f"ab {doc.verdict}{tail}", not doc.exit_code)
    raise typer.Exit(code=doc.exit_code)


ab = model_command(AbOptions, _ab, DOC)
