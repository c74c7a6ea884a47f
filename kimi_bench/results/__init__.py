"""What each report kind derives from the raw records it keeps, derived once.

Per kind: the typed raw records (``ParityRow``...), the typed figures derived from them
(``ParityDerived``...) and one ``derive`` that every reader calls: the writer fills its
summary from it, the read check holds a stated summary against it, and the gate takes its
evidence from it. This package imports only the domain and infrastructure layers.

So far: ``parity``, ``micro`` (``micro_figures``: the table of micro's figures by name,
which the summary, the read check, the gate's limits and the stages table all read) and
``serve`` (serve-ab; its rows and their types in ``serve_rows``, imported from there).
"""

from kimi_bench.results.base import ResultError
from kimi_bench.results.micro import MicroDerived, MicroRaw, derive_micro
from kimi_bench.results.parity import (
    ParityDerived,
    ParityRow,
    derive_parity,
    has_fp32,
    parity_rows,
)

__all__ = [
    "MicroDerived",
    "MicroRaw",
    "ParityDerived",
    "ParityRow",
    "ResultError",
    "derive_micro",
    "derive_parity",
    "has_fp32",
    "parity_rows",
]
