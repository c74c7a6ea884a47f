"""Scenario files: TOML with one table per command (``parity``, ``micro``, ``serve_ab``,
``gate``). Unknown keys are errors, so a typo never silently falls back to a default.
Built-in scenarios ship in ``scenarios/`` (also installed as package data); a user path
works too. CLI options override the file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kimi_bench.infra.jsonio import InputError, parse_toml
from kimi_bench.infra.limits import MAX_CONFIG_BYTES, read_text_or
from kimi_bench.options import RunOptions, describe_error


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file, table and key."""


def builtin_path(name: str) -> Path:
    """``serve-ab`` -> the packaged ``serve-ab.toml`` (or the checkout's scenarios/)."""
    fname = name if name.endswith(".toml") else f"{name}.toml"
    try:
        p = Path(str(resources.files("kimi_bench.scenarios") / fname))
        if p.is_file():
            return p
    except (ModuleNotFoundError, TypeError):
        pass
    p = Path(__file__).resolve().parents[1] / "scenarios" / fname
    if p.is_file():
        return p
    raise ScenarioError(f"no built-in scenario named {name!r}")


def resolve_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.exists():  # a special file is refused by the bounded reader, never opened blocking
        return p
    if p.suffix == ".toml" and ("/" in str(name_or_path)):
        raise ScenarioError(f"scenario file not found: {p}")
    return builtin_path(str(name_or_path))


TABLES = ("run", "parity", "micro", "serve_ab", "gate")


def read_tables(name_or_path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The TOML tables of a scenario file (size-limited, regular files only)."""
    path = resolve_path(name_or_path)
    text = read_text_or(ScenarioError, path, MAX_CONFIG_BYTES, "scenario")
    try:
        raw = parse_toml(text, str(path))
    except InputError as exc:
        raise ScenarioError(str(exc)) from None
    for section, body in raw.items():
        if section not in TABLES:
            raise ScenarioError(
                f"{path}: unknown table [{section}]; expected one of {', '.join(TABLES)}"
            )
        if not isinstance(body, dict):
            raise ScenarioError(f"{path}: [{section}] must be a table")
    return path, raw


def load_scenario(name_or_path: str | Path) -> RunOptions:
    """Validate a whole scenario with the typed models: every key is a model field (an
    unknown key or a wrong type is an error naming file, table and key). ``[run]`` seed and
    device apply to every part that does not set its own."""
    path, raw = read_tables(name_or_path)
    data: dict[str, Any] = dict(raw.get("run", {}))
    shared = {k: data[k] for k in ("seed", "device") if k in data}
    for table in ("parity", "micro", "serve_ab"):
        if table in raw:
            data[table] = {**shared, **raw[table]}
    if "gate" in raw:
        data["gate"] = raw["gate"]
    try:
        return RunOptions.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(describe_error(exc, f"{path}: ", flag_names=False)) from None


def scenario_table(name_or_path: str | Path, table: str) -> dict[str, Any]:
    """One table of a scenario file (for a single command's --scenario), unvalidated: the
    command validates it together with its CLI options."""
    _, raw = read_tables(name_or_path)
    return dict(raw.get(table, {}))


def with_overrides(sc: RunOptions, values: dict[str, Any]) -> RunOptions:
    """``kimi-bench run --seed/--device``: applied to every part of the scenario."""
    upd = {k: values[k] for k in ("seed", "device") if values.get(k) is not None}
    if not upd:
        return sc
    # what the scenario set, re-validated with the overrides (a full dump would set the
    # default arms beside serve-ab's endpoints, which the options refuse)
    data = sc.model_dump(exclude_unset=True)
    for part in ("parity", "micro", "serve_ab"):
        if data.get(part) is not None:
            data[part].update(upd)
    data.update(upd)
    try:
        return RunOptions.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(describe_error(exc, "")) from None
