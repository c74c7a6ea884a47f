"""Progress on stderr (issue 46): the time left is calibrated by what the finished parts
measured against their estimates, and the display moves between slow steps (a terminal's
bar refreshes its time left every ``every_s``, as a pipe gets a line)."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest

from kimi_bench.cli import progress as prog
from kimi_bench.cli.common import make_console


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(prog.time, "monotonic", c)
    return c


def test_later_parts_are_scaled_by_what_the_finished_parts_measured(clock: Clock) -> None:
    con = make_console(file=io.StringIO(), width=200)
    with prog.JobProgress("run", [("parity", 10.0), ("micro", 40.0), ("serve-ab", 60.0)],
                          to=con, every_s=3600) as p:  # fmt: skip
        p.part("parity", 27, "inputs")
        assert p.left_s() == pytest.approx(110.0)  # nothing measured yet: the estimates
        clock.advance(5.0)  # parity took half its estimate: this host is faster
        p.part("micro", 100, "repeats")
        assert p.calibration() == pytest.approx(0.5)
        assert p.left_s() == pytest.approx(20.0 + 30.0)  # both later estimates halved
        clock.advance(30.0)  # micro: 30 s measured for its 20 estimated (scaled)
        p.part("serve-ab", 4, "pipelines")
        assert p.calibration() == pytest.approx(35.0 / 50.0)
        assert p.left_s() == pytest.approx(60.0 * 0.7)
        clock.advance(10.0)
        p.step(2)  # half the pipelines in 10 s: its own pace from here
        assert p.left_s() == pytest.approx(10.0)


def test_a_terminal_bar_refreshes_its_time_left_between_steps(clock: Clock) -> None:
    buf = io.StringIO()
    con = make_console(file=buf, width=120, force_terminal=True)
    seen: list[str] = []
    with prog.JobProgress("serve-ab", [("serve-ab", 300.0)], to=con, every_s=0.02) as p:
        p.part("serve-ab", 4, "pipelines")  # no step for a long while (a slow pipeline)
        bar: Any = p._bar
        for _ in range(3):
            clock.advance(60.0)
            done = threading.Event()
            threading.Timer(0.3, done.set).start()
            done.wait()
            seen.append(bar.tasks[0].fields["left"])
    assert seen[0] != seen[-1], seen  # counted down without a step
    assert seen[-1] == "about 2:00 left", seen
