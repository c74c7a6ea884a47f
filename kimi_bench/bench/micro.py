"""``micro``: where do the milliseconds and bytes go? The loop over (repeat, arm) is
``launch_runs.run_micro_on`` (one host and torchrun alike); the job, the stage records and
the report are built in ``micro_build``. Options: ``kimi_bench.options.MicroOptions``."""

from __future__ import annotations

from collections.abc import Callable

from kimi_bench.bench.launch_runs import run_micro_on
from kimi_bench.bench.micro_build import MicroFailed, build_report, exit_code
from kimi_bench.engine.launch import World
from kimi_bench.options import MicroOptions
from kimi_bench.report.model import Report

__all__ = ["MicroFailed", "build_report", "exit_code", "run_micro"]


def run_micro(opts: MicroOptions, progress: Callable[[int, int], None] | None = None) -> Report:
    """Every arm ``warmup + repeats`` times, interleaved per repeat (arms of one repeat run
    back to back, so speedups pair per repeat), all processes on this host. Under torchrun
    use ``launch_runs.run_micro_on`` (the same loop; each process starts its part)."""
    report = run_micro_on(World(), opts, progress)
    assert report is not None  # the spawn world hosts everything
    return report
