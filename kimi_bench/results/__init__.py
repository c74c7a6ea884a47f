"""What each report kind derives from the raw records it keeps, derived once.

Per kind: the typed raw records (``ParityRow``...), the typed figures derived from them
(``ParityDerived``...) and one ``derive`` that every reader calls: the writer fills its
summary from it, the read check holds a stated summary against it, and the gate takes its
evidence from it. This package imports only the domain and infrastructure layers.

So far: ``parity`` and ``serve`` (serve-ab; its rows and their types in ``serve_rows``,
imported from there). micro still derives its figures in its writers, again in
``report.agree*`` (the read check) and again in ``ci.evidence*`` (the gate); moving them
here is the rest of issue 41.
"""

from kimi_bench.results.base import ResultError
from kimi_bench.results.parity import (
    ParityDerived,
    ParityRow,
    derive_parity,
    has_fp32,
    parity_rows,
)

__all__ = [
    "ParityDerived",
    "ParityRow",
    "ResultError",
    "derive_parity",
    "has_fp32",
    "parity_rows",
]
