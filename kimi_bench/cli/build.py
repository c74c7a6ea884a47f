"""Typer options generated from the typed options models (``kimi_bench.options``).

Every option's default, allowed values and help come from the model field, so a default
lives in exactly one place. Options left unset on the command line are ``None`` here and
do not override a scenario file; the model fills the rest.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from kimi_bench.options import OptionsError, describe_error

# Repeatable options (a list on the command line).
_REPEATABLE = {"notes", "metadata", "endpoints"}
# Flags whose names differ from the field names (aliases of the same option included).
FLAGS: dict[str, tuple[str, ...]] = {
    "notes": ("--note",),
    "metadata": ("--metadata",),
    "endpoints": ("--endpoint",),
    "rates": ("--request-rate", "--rates"),
    "requests": ("--num-prompts", "--requests"),
    "images_per_request": ("--image-count", "--images-per-request"),
    "timeout_s": ("--timeout",),
    "transport": ("--transport", "--carrier"),
    "request_timeout_s": ("--request-timeout",),
}


def _choices(annotation: Any) -> list[str]:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return [str(a) for a in typing.get_args(annotation)]
    for a in args:
        if typing.get_origin(a) is Literal:
            return [str(x) for x in typing.get_args(a)]
        if typing.get_origin(a) is tuple:
            inner = typing.get_args(a)
            if inner and typing.get_origin(inner[0]) is Literal:
                return [str(x) for x in typing.get_args(inner[0])]
    return []


def _cli_type(name: str, annotation: Any) -> Any:
    """The type typer parses; anything composite travels as text the model validates."""
    if name in _REPEATABLE:
        return list[str]
    base = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(base) == 1:
        annotation = base[0]
    if annotation in (int, float, bool, Path):
        return annotation
    return str


def _fmt_default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is None:
        return ""
    if isinstance(value, tuple):
        return ",".join("inf" if v == float("inf") else str(v) for v in value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    return "" if isinstance(value, (dict, BaseModel)) else str(value)


def option_params(
    model: type[BaseModel],
    *,
    flags: dict[str, Sequence[str]] | None = None,
    skip: Sequence[str] = (),
    panel: str | None = None,
) -> list[inspect.Parameter]:
    """One keyword parameter per model field: ``--field-name`` (plus ``flags`` aliases),
    help = the field's description, choices and its default."""
    params = []
    for name, field in model.model_fields.items():
        if name in skip or (field.description or "").startswith("Tests only"):
            continue
        names = list((flags or {}).get(name, ()) or FLAGS.get(name, ())) or [
            f"--{name.replace('_', '-')}"
        ]
        cli_type = _cli_type(name, field.annotation)
        help_text = field.description or ""
        choices = _choices(field.annotation)
        if choices:
            help_text += f" One of: {', '.join(choices)}."
        default = _fmt_default(field)
        if default and "[GPU:" not in help_text:
            help_text += f" \\[default: {default}]"  # escaped: not Rich markup
        if cli_type is bool:
            names = [f"{names[0]}/--no-{names[0][2:]}", *names[1:]]
        metavar = "TEXT" if cli_type in (str, list[str]) else None
        opt = typer.Option(
            *names, help=help_text, show_default=False, rich_help_panel=panel, metavar=metavar
        )
        annotation = Annotated[cli_type | None, opt]  # type: ignore[valid-type]
        params.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
            )
        )
    return params


def command(
    params: list[inspect.Parameter], body: Callable[[dict[str, Any]], None], doc: str
) -> Callable[..., None]:
    """A typer command whose parameters are ``params``; ``body`` gets the given values."""

    def run(**kwargs: Any) -> None:
        body(kwargs)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    # one paragraph per blank-line block, so the help text reflows to the terminal
    run.__doc__ = "\n\n".join(" ".join(p.split()) for p in doc.strip().split("\n\n"))
    return run


def given(values: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """The options actually set on the command line, for the model's fields."""
    return {k: v for k, v in values.items() if k in model.model_fields and v not in (None, [])}


def build(model: type[BaseModel], data: dict[str, Any], source: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise OptionsError(
            describe_error(exc, source, flag_names=not source, flags=dict(FLAGS))
        ) from None
