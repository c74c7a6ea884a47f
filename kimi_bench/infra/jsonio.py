"""The one way kimi-bench parses JSON and TOML it did not write itself (reports, rules,
scenarios, run histories, peers' result files, configs, request bodies): bounded nesting,
no non-standard constants, every failure one error naming the input.

Python's parsers recurse: a 100,000-deep ``[[[[...]]]]`` raises ``RecursionError`` (not a
``ValueError``), which a caller that catches ``ValueError`` turns into a crash. Here it is
caught, and a document that parses but nests deeper than ``MAX_DEPTH`` (a report is about
10 levels deep, a peer's file about 8) is refused too, so no consumer ever walks one.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

# Deepest nesting of objects/arrays accepted in any JSON or TOML input. kimi-bench's own
# reports reach ~10 (arms.<arm>.stages.<stage>.summary_ms, repeat timelines' spans).
MAX_DEPTH = 64


class InputError(ValueError):
    """JSON or TOML text that cannot be used; the message names the input."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name} (JSON has no NaN or Infinity)")


def depth_problem(obj: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``obj`` nests too deeply, or None (walked without recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return f"nested more than {max_depth} levels deep"
        stack.extend((child, depth + 1) for child in children)
    return None


def parse_json(text: str, where: str, *, constants: bool = False) -> Any:
    """``text`` as JSON; InputError ``"{where}: {problem}"`` (so ``where`` reads as the
    start of a sentence: ``"report.json is not a JSON report"``). ``constants``: accept NaN
    and Infinity as Python's json does (peers' tools write them); kimi-bench's own files
    never hold them."""
    try:
        obj = json.loads(text) if constants else json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    problem = depth_problem(obj)
    if problem:
        raise InputError(f"{where}: {problem}")
    return obj


def parse_json_lines(text: str, where: str, *, constants: bool = False) -> list[dict[str, Any]]:
    """One JSON object per non-empty line (InputError naming the line)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        obj = parse_json(line, f"{where}:{n}: not a JSON line", constants=constants)
        if not isinstance(obj, dict):
            raise InputError(f"{where}:{n}: not a JSON object")
        out.append(obj)
    return out


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """``text`` as TOML (InputError naming ``where``; nesting bounded as for JSON)."""
    try:
        obj = tomllib.loads(text)
    except RecursionError:
        raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}") from None
    problem = depth_problem(obj)
    if problem:
        raise InputError(f"{where}: {problem}")
    return obj
