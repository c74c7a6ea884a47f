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
from pydantic_core import PydanticUndefined

from kimi_bench.cli.common import usage_error
from kimi_bench.options import OptionsError, OutputOptions, describe_error

# Repeatable options (a list on the command line).
_REPEATABLE = {"notes", "metadata", "endpoints", "goodput", "headers"}
# Fields read as text on the command line although the model keeps a number (a range or
# weights the model turns into one: ``--images-per-request 1-4``).
_TEXT = {"images_per_request"}
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
    "max_tokens": ("--max-tokens", "--random-output-len"),
    "headers": ("--header",),
    "extra_body": ("--extra-body", "--extra-request-body"),  # vLLM's, sglang.bench_serving's
    "input_len": ("--input-len", "--random-input-len"),
    "requests_file": ("--requests-file", "--dataset-path"),
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


def _is_list(annotation: Any) -> bool:
    """Whether the option takes several values (a tuple field: ``--arms a,b``)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return any(typing.get_origin(a) is tuple for a in [annotation, *args])


def _cli_type(name: str, annotation: Any, repeatable: Sequence[str] = ()) -> Any:
    """The type typer parses; anything composite travels as text the model validates."""
    base = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(base) == 1:
        annotation = base[0]
    if name in _TEXT:
        return str
    if name in _REPEATABLE or name in repeatable:
        inner = typing.get_args(annotation)
        return list[Path] if inner and inner[0] is Path else list[str]
    if annotation in (int, float, bool, Path):
        return annotation
    return str


def _fmt_default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is None or value is PydanticUndefined:
        return ""
    if isinstance(value, tuple):
        return ",".join("inf" if v == float("inf") else str(v) for v in value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    return "" if isinstance(value, (dict, BaseModel)) else str(value)


def _argument(name: str, field: FieldInfo, annotation: Any) -> inspect.Parameter:
    """A positional argument (``cli_arguments``): a list when the field is a tuple."""
    many = typing.get_origin(annotation) is tuple
    cli_type: Any = list[Path] if many else _cli_type(name, annotation)
    required = field.is_required()
    arg = typer.Argument(
        help=field.description or "", show_default=False, metavar=name.upper().rstrip("S")
    )
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=inspect.Parameter.empty if required else None,
        annotation=Annotated[cli_type if required else cli_type | None, arg],
    )


def option_params(
    model: type[BaseModel],
    *,
    flags: dict[str, Sequence[str]] | None = None,
    skip: Sequence[str] = (),
    panel: str | None = None,
) -> list[inspect.Parameter]:
    """One parameter per model field: positional for the model's ``cli_arguments``, else
    ``--field-name`` (or the model's ``cli_flags``, ``flags`` or the shared aliases), help =
    the field's description, choices and its default. "Tests only" fields are hidden."""
    arguments = getattr(model, "cli_arguments", ())
    repeatable = getattr(model, "cli_repeatable", ())
    own_flags = {**getattr(model, "cli_flags", {}), **(flags or {})}
    params = [_argument(n, model.model_fields[n], model.model_fields[n].annotation)
              for n in arguments if n not in skip]  # fmt: skip
    for name, field in model.model_fields.items():
        if name in skip or name in arguments:
            continue
        names = list(own_flags.get(name, ()) or FLAGS.get(name, ())) or [
            f"--{name.replace('_', '-')}"
        ]
        cli_type = _cli_type(name, field.annotation, repeatable)
        help_text = field.description or ""
        choices = _choices(field.annotation)
        if choices:
            what = "Comma-separated, any of" if _is_list(field.annotation) else "One of"
            help_text += f" {what}: {', '.join(choices)}."
        default = _fmt_default(field)
        if default and "[GPU:" not in help_text and "[default:" not in help_text:
            help_text += f" [default: {default}]"  # help is plain text (main.py)
        if cli_type is bool:
            names = [f"{names[0]}/--no-{names[0][2:]}", *names[1:]]
        metavar = {str: "TEXT", list[str]: "TEXT", list[Path]: "PATH"}.get(cli_type)
        opt = typer.Option(
            *names,
            help=help_text,
            show_default=False,
            rich_help_panel=panel,
            metavar=metavar,
            hidden=help_text.startswith("Tests only"),
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
    """The options actually set on the command line, for the model's fields (by the name
    the model validates: a field's alias when it has one)."""
    out = {}
    for k, v in values.items():
        field = model.model_fields.get(k)
        if field is not None and v not in (None, []):
            alias = field.validation_alias
            out[alias if isinstance(alias, str) else k] = v
    return out


def build(model: type[BaseModel], data: dict[str, Any], source: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise OptionsError(
            describe_error(
                exc,
                source,
                flag_names=not source,
                flags={**FLAGS, **getattr(model, "cli_flags", {})},
            )
        ) from None


def model_command(
    model: type[BaseModel],
    body: Callable[[Any, dict[str, Any]], None],
    doc: str,
    extra: Sequence[inspect.Parameter] = (),
) -> Callable[..., None]:
    """A command generated from ``model`` (plus ``extra`` parameters, e.g. the output
    options): ``body`` gets the validated options and every given value; invalid options
    are a usage error (exit 2) naming the option."""

    def validated(values: dict[str, Any]) -> None:
        try:
            opts = build(model, given(values, model))
        except OptionsError as exc:
            raise usage_error(str(exc)) from None
        body(opts, values)

    return command([*option_params(model), *extra], validated, doc)


def output_params(model: type[OutputOptions] = OutputOptions) -> list[inspect.Parameter]:
    """``--out``/``--output-dir``, ``--format``, ``--append-jsonl`` and ``--overwrite``
    (``options.OutputOptions``, or a command's own variant), shared by every command that
    writes a report."""
    return option_params(model)
