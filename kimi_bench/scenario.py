"""Scenario files: TOML with one table per command (``parity``, ``micro``, ``serve_ab``,
``gate``). Unknown keys are errors, so a typo never silently falls back to a default.
Built-in scenarios ship in ``scenarios/`` (also installed as package data); a user path
works too. CLI options override the file."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

SECTIONS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "parity": {
        "preset": str,
        "device": str,
        "ranks": int,
        "policy": str,
        "batch_size": int,
        "images_per_request": int,
        "images": str,
    },
    "micro": {
        "images": str,
        "ranks": int,
        "transport": str,
        "repeats": int,
        "warmup": int,
        "content": str,
        "preset": str,
        "device": str,
    },
    "serve_ab": {
        "rates": list,
        "requests": int,
        "images_per_request": int,
        "resolution": str,
        "ranks": int,
        "processor_workers": int,
        "transport": str,
        "arms": list,
        "burstiness": (int, float),
        "warmup_requests": int,
        "repeats": int,
        "seed": int,
        "device": str,
        "image_format": str,
        "image_content": str,
        "unique_images": int,
        "request_timeout_s": (int, float),
        "preset": str,
        "standins": dict,
    },
    "gate": {"rules": str, "baseline": str},
    "run": {"description": str, "seed": int},
}
STANDIN_KEYS: dict[str, type | tuple[type, ...]] = {
    "encoder_gflop_per_patch": (int, float),
    "prefill_gflop_per_token": (int, float),
    "text_tokens_per_request": int,
    "cpu_flops_scale": (int, float),
}


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
    if p.is_file():
        return p
    if p.suffix == ".toml" and ("/" in str(name_or_path)):
        raise ScenarioError(f"scenario file not found: {p}")
    return builtin_path(str(name_or_path))


def _check(where: str, value: Any, want: type | tuple[type, ...]) -> None:
    ok = isinstance(value, want) and not (isinstance(value, bool) and want in (int, (int, float)))
    if not ok:
        names = want.__name__ if isinstance(want, type) else " or ".join(t.__name__ for t in want)
        raise ScenarioError(f"{where} must be {names}, got {value!r}")


def load_scenario(name_or_path: str | Path) -> dict[str, dict[str, Any]]:
    path = resolve_path(name_or_path)
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    for section, body in raw.items():
        if section not in SECTIONS:
            raise ScenarioError(
                f"{path}: unknown table [{section}]; expected one of {', '.join(SECTIONS)}"
            )
        if not isinstance(body, dict):
            raise ScenarioError(f"{path}: [{section}] must be a table")
        for key, value in body.items():
            spec = SECTIONS[section]
            if key not in spec:
                raise ScenarioError(
                    f"{path}: unknown key {section}.{key}; valid keys: {', '.join(sorted(spec))}"
                )
            _check(f"{path}: {section}.{key}", value, spec[key])
        for key, value in body.get("standins", {}).items():
            if key not in STANDIN_KEYS:
                raise ScenarioError(
                    f"{path}: unknown key {section}.standins.{key}; valid keys: "
                    f"{', '.join(sorted(STANDIN_KEYS))}"
                )
            _check(f"{path}: {section}.standins.{key}", value, STANDIN_KEYS[key])
    return raw
