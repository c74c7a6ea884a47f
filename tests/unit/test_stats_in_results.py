"""Issue 41: the statistics of one report's raw data are derived in ``kimi_bench.results``
(and the routines live in ``kimi_bench.infra``), nowhere else. An AST scan of the package
finds every call of a statistics routine outside those two packages; only the modules
below, each for its stated reason, may make one."""

from __future__ import annotations

import ast
from pathlib import Path

import kimi_bench

PACKAGE = Path(kimi_bench.__file__).parent
HOME = ("results", "infra")  # where statistics are derived, and where the routines live

# a call of one of these names (a function, a method or a class) computes a statistic
STAT_CALLS = frozenset({
    "median", "percentile", "quantile", "mean", "std", "stdev", "pstdev", "variance",
    "bootstrap", "cluster_bootstrap", "compare", "ratio", "rerun_interval", "difference",
    "ratio_of_differences", "mann_whitney", "Measurement", "nanmedian", "nanpercentile",
    "nanmean", "ttest_1samp", "ttest_rel", "pct_delta", "interval",
})  # fmt: skip

# modules that may: each combines reports (or measures, or describes an input), one line why
ALLOWED = {
    "ci/ab_stats.py": "cross-report: an A/B test over repeated runs of two builds",
    "ci/baseline.py": "cross-report: a report against the stored baseline's samples",
    "ci/calibrate.py": "cross-report: noise limits from several runs of one build",
    "ci/compare.py": "cross-report: two reports' Derived values side by side",
    "ci/history.py": "cross-report: a metric's trend over the history of reports",
    "project/calibration.py": "cross-report: a projection calibrated on several reports",
    "bench/cross_runtime.py": "cross-report: one runtime's report against another's",
    "engine/floor.py": "the measuring engine: it measures the data floor's raw samples",
    "serving/workload/summary.py": "describes the input workload, not a result",
}


def _modules(tree: ast.Module) -> set[str]:
    """The names a module binds to imported modules (``np``, ``statistics``, ``stats``)."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.asname or a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            out |= {a.asname or a.name for a in n.names if a.name[:1].islower()}
    return out


def _called(node: ast.Call, modules: set[str]) -> str | None:
    """The routine a call runs: a name (``median(xs)``, ``Measurement(xs)``) or a module's
    function (``np.median(xs)``). A method of an object (``cell.median("ttft")``) reads
    what that object derived (a ``results`` model), and is not counted."""
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
        return f.attr
    return None


def stat_calls(source: str) -> list[str]:
    """``name:line`` of every statistics call in a module's source."""
    tree = ast.parse(source)
    modules = _modules(tree)
    return [
        f"{name}:{n.lineno}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and (name := _called(n, modules)) in STAT_CALLS
    ]


def offenders() -> dict[str, list[str]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in HOME:
            continue
        if calls := stat_calls(path.read_text()):
            out[rel] = calls
    return out


def test_the_scan_finds_statistics_calls() -> None:
    src = (
        "import numpy as np\nfrom kimi_bench.infra import stats\n"
        "x = np.median([1])\ny = stats.percentile([1], 90)\nz = Measurement([1])\n"
    )
    assert stat_calls(src) == ["median:3", "percentile:4", "Measurement:5"]
    assert stat_calls("x = sorted([1])\ny = cell.median('ttft')\n") == []


def test_only_cross_report_modules_compute_statistics_outside_results() -> None:
    found = offenders()
    unexpected = {m: c for m, c in found.items() if m not in ALLOWED}
    assert not unexpected, f"statistics of one report belong in kimi_bench.results: {unexpected}"


def test_the_allowed_modules_do_compute_statistics() -> None:
    stale = set(ALLOWED) - set(offenders())
    assert not stale, f"no statistics call left: take {stale} out of ALLOWED"
