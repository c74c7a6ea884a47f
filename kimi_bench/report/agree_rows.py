"""Derived blocks of the row-based kinds against their rows (see ``agree``): parity (one
row per input; serve-ab's, one row per request, are ``agree_serve``'s), and
:func:`disagreement`, the entry point ``check_envelope`` calls for every report it reads."""

from __future__ import annotations

from typing import Any

from kimi_bench.report.agree import EDITED, Disagreement, block, micro_disagreement
from kimi_bench.report.agree_serve import serve_disagreement
from kimi_bench.results import ResultError, derive_parity, has_fp32, parity_rows

Dict = dict[str, Any]


# -------------------------------------------------------------------------------- parity


def parity_disagreement(raw: Dict) -> None:
    try:
        fp32 = has_fp32(raw.get("config"))
        derived = derive_parity(parity_rows(raw.get("results"), fp32), fp32)
    except ResultError as exc:
        raise Disagreement(str(exc)) from None
    if problem := derived.disagreement(block(raw, "summary")):
        raise Disagreement(f"{problem}: {EDITED}")


_BY_KIND = {"micro": micro_disagreement, "serve-ab": serve_disagreement,
            "parity": parity_disagreement}  # fmt: skip


def disagreement(raw: Dict) -> str | None:
    """Why a report's derived blocks cannot be trusted (naming the field), or None. ``raw``
    is a report dict in the current layout whose types have been validated."""
    check = _BY_KIND.get(str(raw.get("kind")))
    if check is None:
        return None
    try:
        check(raw)
    except Disagreement as exc:
        return str(exc)
    return None
