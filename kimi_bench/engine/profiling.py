"""``--profile DIR``: torch profiler traces (Chrome trace JSON, ``chrome://tracing`` or
Perfetto) of a pipeline process for a few measured requests, with the pipeline's stage
names on the timeline.

A process makes one :class:`StageProfiler`; each request (or micro repeat) it profiles
gets a step hook from :meth:`StageProfiler.hook`, which wraps the step's own hook. The
pipeline marks a stage when it ends (``Step.hook.mark(stage)``), so the hook keeps one
``record_function`` range open at a time under a placeholder label and learns its name at
the mark; when the trace is written (:meth:`StageProfiler.close`), the placeholders are
renamed ``stage:<name>`` in the file (one clock, the profiler's own). After ``requests``
profiled requests the profiler stops and writes ``DIR/<name>.trace.json``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

PLACEHOLDER = "kb#"
STAGE_PREFIX = "stage:"


@dataclass
class _StageHook:
    """The step's own hook, plus one open range per stage (named at its mark)."""

    inner: Any
    owner: StageProfiler
    current: Any = None
    label: str = ""

    def open(self) -> None:
        self.label = self.owner.next_label()
        self.current = record_function(self.label)
        self.current.__enter__()

    def mark(self, stage: str) -> None:
        if self.inner is not None:
            self.inner.mark(stage)
        if self.current is not None:
            self.current.__exit__(None, None, None)
            if stage != "start":  # the clock's zero, not a stage: its range is dropped
                self.owner.names[self.label] = STAGE_PREFIX + stage
        self.open()

    def done(self) -> None:
        if self.current is not None:
            self.current.__exit__(None, None, None)  # after the last mark: not a stage
            self.current = None

    def __getattr__(self, name: str) -> Any:  # ``marks`` of a ClockHook, for instance
        return getattr(self.inner, name)


@dataclass
class StageProfiler:
    """Profiles the first ``requests`` requests it is asked to (``hook``/``finish``)."""

    folder: Path
    name: str
    requests: int
    names: dict[str, str] = field(default_factory=dict)
    _prof: Any = None
    _count: int = 0
    _labels: int = 0
    written: Path | None = None

    def next_label(self) -> str:
        self._labels += 1
        return f"{PLACEHOLDER}{self._labels}"

    @property
    def active(self) -> bool:
        return self.written is None and self._count < self.requests

    def hook(self, inner: Any) -> Any:
        """The hook a profiled request's step runs with (``inner`` when done profiling)."""
        if not self.active:
            return inner
        if self._prof is None:
            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            self._prof = profile(activities=activities, record_shapes=False)
            self._prof.__enter__()
        h = _StageHook(inner, self)
        h.open()
        return h

    def finish(self, hook: Any) -> None:
        """A profiled request ended; the trace is written after the last one."""
        if isinstance(hook, _StageHook):
            hook.done()
            self._count += 1
            if self._count >= self.requests:
                self.close()

    def drop(self, hook: Any) -> None:
        """A step that served no profiled request (idle): on the timeline, not counted."""
        if isinstance(hook, _StageHook):
            hook.done()

    def close(self) -> Path | None:
        """Stop and write the trace (also when fewer requests came than planned)."""
        if self._prof is None or self.written is not None:
            return self.written
        self._prof.__exit__(None, None, None)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self.name}.trace.json"
        self._prof.export_chrome_trace(str(path))
        rename_stages(path, self.names)
        self.written = path
        return path


def rename_stages(path: Path, names: dict[str, str]) -> None:
    """Placeholder ranges get their stage's name; ranges never named (after a process's
    last mark) are dropped."""
    trace = json.loads(path.read_text())
    events = []
    for ev in trace.get("traceEvents", []):
        label = ev.get("name", "")
        if isinstance(label, str) and label.startswith(PLACEHOLDER):
            if label not in names:
                continue
            ev["name"] = names[label]
        events.append(ev)
    trace["traceEvents"] = events
    path.write_text(json.dumps(trace))


def maybe_profiler(folder: str | Path | None, name: str, requests: int) -> StageProfiler | None:
    return StageProfiler(Path(folder), name, requests) if folder else None


def profiled(prof: StageProfiler | None, make: Callable[[Any], Any], inner: Any) -> Any:
    """``make(hook)`` with the profiler's hook when profiling, else with ``inner``."""
    return make(prof.hook(inner) if prof is not None else inner)
