"""Where tests inject faults: production code calls a :class:`FaultHooks` object at a few
points (a worker's repeat, a rank before it maps the arena, a producer taking a request,
the tokens of a streamed answer) and never looks at what the hooks do. The base class does
nothing; tests subclass it (``tests/faults.py``). A hooks object travels inside the job
objects to spawned worker processes, so it must pickle: a module-level class whose fields
pickle.

A core module, not a part of the engine or the server: the seams are called from the
process engine (workers) and the serving layer (the SSE stream), and the hooks are built
by the scenarios and the CLI; core is the one layer every one of them may import.

A run started as a command gets its hooks from a hidden option naming a class
(``--fault-hooks module:Class[:key=value,...]``), loaded once at the start of the run by
:func:`load_hooks`; real runs leave it unset and get :data:`NO_FAULTS`."""

from __future__ import annotations

import ast
import importlib
from collections.abc import AsyncIterator
from typing import Any, Protocol


class Hook(Protocol):
    """A step's timing hook (``pipeline.step.Hook``): ``mark`` notes a stage's end."""

    def mark(self, stage: str) -> None: ...


class FaultHooks:
    """The seams, each a no-op here. A hook fails its process by raising (or by ending
    it); it must not change what a run measures when it does not fire."""

    def on_repeat(self, rank: int | None, iteration: int) -> None:
        """micro: a process finished its part of measured round ``iteration`` (0-based,
        warm-up rounds first; control rounds are not reported). ``rank`` None: the
        producer."""

    def clock(self, arm: str, rank: int | None, hook: Hook) -> Hook:
        """micro: the timing hook of ``arm``'s step in one process (``rank`` None: the
        producer), made right before the step runs. A hook may return a wrapper whose
        ``mark`` does extra work in a stage and ends the stage after it (a slower build:
        the work is inside the measured region, the report is never edited); the default
        returns ``hook`` itself."""
        return hook

    def before_attach(self, rank: int) -> None:
        """micro: ``rank`` joined its process group and is about to map the zero-copy
        arena."""

    def on_request(self, rid: int) -> None:
        """serve-ab and the serve emulator: a producer took request ``rid`` off the queue
        (ids count from 0: warm-up requests, or the emulator's start-up request, first).
        A hook may raise, block or end the process."""

    def stream(self, events: AsyncIterator[str]) -> AsyncIterator[str]:
        """serving: the token events (SSE ``data:`` lines) of one streamed answer, between
        its role chunk and its final chunk; the default passes them on. A hook may yield
        other lines (a malformed event) or none (an answer without a token), or raise
        ``ConnectionError`` (the connection drops before the final chunk); the answer's
        outcome is then ``error``."""
        return events


NO_FAULTS = FaultHooks()


def _value(text: str) -> Any:
    """A Python literal (``1``, ``2.5``, ``None``, ``'x'``), else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def load_hooks(spec: str | None) -> FaultHooks:
    """The hooks ``spec`` names: ``module:Class`` or ``module:Class:key=value,...`` (the
    class's keyword arguments; a value is a Python literal or else text); None:
    :data:`NO_FAULTS`. ValueError when the spec is malformed or names no FaultHooks."""
    if not spec:
        return NO_FAULTS
    module, _, rest = spec.partition(":")
    name, _, args = rest.partition(":")
    kwargs: dict[str, Any] = {}
    for pair in filter(None, args.split(",")):
        key, eq, value = pair.partition("=")
        if not eq or not key.isidentifier():
            raise ValueError(f"--fault-hooks {spec}: {pair!r} is not key=value")
        kwargs[key] = _value(value)
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"--fault-hooks {spec}: cannot load {module}:{name}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, FaultHooks)):
        raise ValueError(f"--fault-hooks {spec}: {module}:{name} is not a FaultHooks class")
    hooks: FaultHooks = cls(**kwargs)
    return hooks
