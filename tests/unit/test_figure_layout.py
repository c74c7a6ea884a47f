"""Every figure of every report kind reads cleanly (issue 28), judged by matplotlib's
renderer bounding boxes (``tests/figure_layout.py``): no text cut by the figure's edge, no
legend over bars, markers, error bars, steps or value labels, no tick labels running into
each other, no ``6x10^2`` ticks on an axis of milliseconds. The checker itself is shown
the defects the issue found, drawn on purpose."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from kimi_bench.report import figbase
from kimi_bench.report.figures import FIGURES, figure_input
from kimi_bench.report.model import load_report
from tests.figure_layout import layout_problems

REPO = Path(__file__).resolve().parents[2]
R = REPO / "reports"
# one report of each kind and shape: 3 and 4 arms, 1 to 3 rates, CPU and H200, 1-2 GPUs
FAST = [
    "examples/cpu-run/parity",
    "examples/cpu-run/micro",
    "examples/cpu-run/serve-ab",
    "baselines/h200/micro/sglang-0.5.23/r8-shm",
    "baselines/h200/serve-ab/r8-shm",
    "projection/h200-from-r2",
]
MORE = [
    "baselines/h200/deferred-decode/micro/pr-33921/r8-shm-photo",
    "baselines/h200/deferred-decode/serve-ab/pr-33921/r8-shm",
    "baselines/h200x2/micro/r2-2gpu",
    "baselines/h200x2/serve-ab/r2-1gpu",
    "baselines/h200/parity/builtin-k3",
    "gate-check/h200/serve-ab/r8-pickle",
]


@pytest.fixture(autouse=True)
def _close() -> Any:
    yield
    figbase.pyplot().close("all")


def _check(path: str) -> None:
    rep = load_report(R / path).to_dict()
    specs = FIGURES[rep["kind"]]
    assert specs
    data = figure_input(rep)
    for spec in specs:
        fig = spec.build(data)
        assert layout_problems(fig) == [], f"{path}: {spec.stem}"


@pytest.mark.slow
@pytest.mark.parametrize("path", FAST)
def test_figures_read_cleanly(path: str) -> None:
    _check(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", MORE)
def test_figures_of_other_shapes_read_cleanly(path: str) -> None:
    _check(path)


def test_the_checker_sees_the_defects_the_issue_found() -> None:
    plt = figbase.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1, 2], [100, 600, 2000], "o", label="rate inf median")
    ax.set_yscale("log")
    ax.legend(loc="upper right", bbox_to_anchor=(1.0, 1.0))  # on the rate-inf point
    fig.suptitle("x" * 200)  # longer than the figure is wide
    problems = layout_problems(fig)
    assert any("suptitle is cut" in p for p in problems), problems
    assert any("covers 1 point(s)" in p for p in problems), problems
    assert any("scientific notation" in p for p in problems), problems

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.barh([0, 1], [9, 9], label="eager")
    ax.text(7.0, -0.42, "payload 151 ms", va="bottom")  # where the legend goes
    ax.legend(loc="lower right")
    problems = layout_problems(fig)
    assert any("covers label 'payload 151 ms" in p for p in problems), problems
    assert any("covers bar" in p for p in problems), problems
