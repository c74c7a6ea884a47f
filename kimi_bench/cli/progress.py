"""Progress and ETA on stderr for long commands (``run``; the parts of ``micro`` and
``serve-ab`` use the same class).

On a terminal a Rich progress bar per part. Off a terminal (a pipe, a file, a CI log) a
plain line when a part starts or ends and, while one runs, every ``every_s`` seconds
(``KIMI_BENCH_PROGRESS_S``, default 5): ``run: micro 3/12 repeats, 0:42 elapsed, about
1:10 left``; on a terminal the bar's time left is refreshed as often. The time left is the
estimate of the parts still to come plus the current part's remainder: its estimate until a
fifth of its steps are done, then the pace measured so far. Every estimate still to use is
scaled by what the parts done so far measured against their estimates (this machine at its
load now), so a run on a busier or quieter host than the estimate assumed corrects itself
after its first part.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kimi_bench.cli.common import err_console, say


def fmt_duration(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:03``."""
    s = max(0, round(seconds))
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60}:{rem % 60:02d}"


def _interval_s() -> float:
    try:
        return max(0.2, float(os.environ.get("KIMI_BENCH_PROGRESS_S", "5")))
    except ValueError:
        return 5.0


class JobProgress:
    """Parts with an estimate each (seconds); within a part, steps (repeats, inputs,
    pipelines). Thread-safe; use as a context manager."""

    def __init__(
        self,
        name: str,
        parts: Sequence[tuple[str, float]],
        *,
        to: Console | None = None,
        every_s: float | None = None,
    ) -> None:
        self.name = name
        self.estimates = dict(parts)
        self.order = [p for p, _ in parts]
        self.console = to or err_console
        self.every_s = _interval_s() if every_s is None else every_s
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._part: str | None = None
        self._part_t0 = self.t0
        self._spent = self._planned = 0.0  # measured and estimated seconds of finished parts
        self._done, self._total, self._unit, self._item = 0, 0, "", ""
        self._bar: Progress | None = None
        self._task: Any = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> JobProgress:
        self._thread = threading.Thread(target=self._beat, daemon=True)
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[left]}", markup=False),
                TextColumn("{task.fields[item]}", markup=False),
                console=self.console,
                transient=False,
            )
            self._bar.__enter__()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._bar is not None:
            self._bar.__exit__(*exc)
        elapsed = fmt_duration(time.monotonic() - self.t0)
        estimate = fmt_duration(sum(self.estimates.values()))
        self._line(f"{self.name}: done in {elapsed} (estimate {estimate})")

    # --------------------------------------------------------------------------- updates

    def part(self, name: str, total: int = 0, unit: str = "steps") -> None:
        """A part starts (``name`` is one of ``parts``; ``total`` steps of ``unit``)."""
        with self._lock:
            now = time.monotonic()
            if self._part is not None and self.estimates.get(self._part, 0.0) > 0:
                self._spent += now - self._part_t0
                self._planned += self.estimates[self._part]
            self._part, self._part_t0 = name, now
            self._done, self._total, self._unit, self._item = 0, total, unit, ""
        if self._bar is not None:
            self._task = self._bar.add_task(
                name, total=total or None, left=self._left_text(), item=""
            )
        else:
            self._line(self.status())

    def step(self, done: int, total: int | None = None, item: str = "") -> None:
        with self._lock:
            self._done, self._item = done, item
            if total:
                self._total = total
        if self._bar is not None and self._task is not None:
            self._bar.update(
                self._task,
                completed=done,
                total=self._total or None,
                left=self._left_text(),
                item=item,
            )

    # ------------------------------------------------------------------------- reporting

    def calibration(self) -> float:
        """Measured over estimated seconds of the parts finished so far (1.0 before any)."""
        with self._lock:
            return self._spent / self._planned if self._planned > 0 else 1.0

    def left_s(self) -> float:
        """Seconds left: the current part's remainder plus the parts still to come, each
        estimate scaled by :meth:`calibration`."""
        scale = self.calibration()
        with self._lock:
            part, done, total = self._part, self._done, self._total
            in_part = time.monotonic() - self._part_t0
        if part is None:
            return sum(self.estimates.values())
        est = self.estimates.get(part, 0.0) * scale
        frac = done / total if total else 0.0
        # once a fifth of the part is done, its own pace; before that, its estimate
        rest = in_part / frac - in_part if frac >= 0.2 else max(est - in_part, 0.0)
        later = self.order[self.order.index(part) + 1 :] if part in self.order else []
        return rest + sum(self.estimates[p] for p in later) * scale

    def _left_text(self) -> str:
        return f"about {fmt_duration(self.left_s())} left"

    def status(self) -> str:
        with self._lock:
            part, done, total, unit, item = (
                self._part, self._done, self._total, self._unit, self._item
            )  # fmt: skip
        where = f" {part}" if part else ""
        steps = f" {done}/{total} {unit}" if total else ""
        what = f" ({item})" if item else ""
        elapsed = fmt_duration(time.monotonic() - self.t0)
        return f"{self.name}:{where}{steps}{what}, {elapsed} elapsed, {self._left_text()}"

    def _line(self, text: str) -> None:
        say(text, style="dim", err=True, to=self.console)

    def _beat(self) -> None:
        """Every ``every_s``: a plain line off a terminal, the bar's time left on one (so
        the display moves between steps that take longer than that)."""
        while not self._stop.wait(self.every_s):
            if self._bar is None:
                self._line(self.status())
            elif self._task is not None:
                self._bar.update(self._task, left=self._left_text())
