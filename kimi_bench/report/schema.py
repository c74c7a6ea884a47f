"""Checks a report dict against its kind's model (``report.kinds``) before any consumer
reads it, so that a hand-edited or hostile report is refused with the field named
(``"5"`` where a number belongs, a list where an object belongs, a negative time, an
infinity) instead of failing inside a rule or a figure."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from kimi_bench.report.kinds import Envelope, model_for


class ReportProblem(ValueError):
    """A report dict that does not match its kind's model; the message names the field."""


def where(loc: tuple[Any, ...] | list[Any]) -> str:
    """``arms.deferred.total_ms.samples[1]`` for a location (list indices in brackets)."""
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc]
    return "".join(parts).lstrip(".") or "(top level)"


def _message(err: ErrorDetails) -> str:
    """One pydantic error in the words the gate has always used for these cases."""
    value, ctx = err["input"], err.get("ctx") or {}
    if err["type"] == "greater_than_equal":
        return f"{value!r} is less than the minimum of {ctx.get('ge')}"
    if err["type"] == "finite_number":
        return f"{value!r} is not a finite number (JSON has no infinity; write null)"
    if err["type"] == "missing":
        return "is required but missing"
    return f"{value!r}: {err['msg'][:1].lower()}{err['msg'][1:]}"


def parse_report(raw: dict[str, Any]) -> Envelope:
    """``raw`` as its kind's model; ReportProblem (``field summary.x: message``) naming
    the first field that does not match."""
    try:
        return model_for(raw).model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise ReportProblem(f"field {where(err['loc'])}: {_message(err)}") from None


def report_problem(raw: dict[str, Any]) -> str | None:
    """The first problem of a report dict as ``field summary.x: message``, or None."""
    try:
        parse_report(raw)
    except ReportProblem as exc:
        return str(exc)
    return None
