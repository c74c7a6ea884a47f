"""What every report kind's results share: the error a reader raises on raw records it
cannot use, naming the record and its field."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ResultError(ValueError):
    """Raw records that cannot be used (a missing or mistyped field), or a stated figure
    that disagrees with what they give; the message names the field."""


def typed_records(records: Any, model: type[M], where: str) -> list[M]:
    """``records`` (a JSON list) as ``model`` instances; ResultError names the first record
    and field that do not fit, as ``where[i].field``."""
    if not isinstance(records, Sequence) or isinstance(records, str | bytes):
        raise ResultError(f"{where} is missing or not a list: no raw data to check")
    out = []
    for i, rec in enumerate(records):
        try:
            out.append(model.model_validate(rec))
        except ValidationError as exc:
            err = exc.errors()[0]
            at = "".join(f".{p}" for p in err["loc"])
            raise ResultError(f"{where}[{i}]{at}: {err['msg']}, got {err['input']!r}") from None
    return out
