"""Derived blocks of the row-based kinds against their rows (see ``agree``): parity (one
row per input; serve-ab's, one row per request, are ``agree_serve``'s), and
:func:`disagreement`, the entry point ``check_envelope`` calls with every report it reads,
parsed into its kind's model."""

from __future__ import annotations

from kimi_bench.report.agree import EDITED, Disagreement, micro_disagreement
from kimi_bench.report.agree_serve import serve_disagreement
from kimi_bench.report.envelope import Envelope
from kimi_bench.report.kinds import MicroReport, ParityReport, ServeReport
from kimi_bench.results import ResultError, derive_parity, has_fp32, parity_rows


def parity_disagreement(report: ParityReport) -> None:
    """The summary's figures against those the rows give (``results.parity``: the rows
    typed as its derivation reads them, the runtime's FP32 features from the config as
    written)."""
    if "results" not in report.model_fields_set:
        raise Disagreement("results is missing or not a list: no raw data to check")
    fp32 = has_fp32(report.config.model_extra)
    rows = [row.model_dump(exclude_unset=True) for row in report.results]
    try:
        derived = derive_parity(parity_rows(rows, fp32), fp32)
    except ResultError as exc:
        raise Disagreement(str(exc)) from None
    if problem := derived.disagreement(report.summary.model_dump(exclude_unset=True)):
        raise Disagreement(f"{problem}: {EDITED}")


def disagreement(report: Envelope) -> str | None:
    """Why a report's derived blocks cannot be trusted (naming the field), or None.
    ``report`` is a report in the current layout, parsed into its kind's model."""
    try:
        if isinstance(report, MicroReport):
            micro_disagreement(report)
        elif isinstance(report, ServeReport):
            serve_disagreement(report)
        elif isinstance(report, ParityReport):
            parity_disagreement(report)
    except Disagreement as exc:
        return str(exc)
    return None
