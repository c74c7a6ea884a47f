"""The load a peer tool offered, as it recorded it: request rate, concurrency limit and
burstiness, and the one label every format gets for it.

Labels (the ``rate`` of the imported report's rows; ``compare`` matches rows by it and a
rules table names it, ``[serve_ab.c1]``):

- ``inf``: everything sent at once, no concurrency limit (a burst);
- ``4``: 4 requests/s offered, no concurrency limit;
- ``c1``: at most 1 request in flight, sent as fast as that allows (sglang/vLLM
  ``--request-rate inf --max-concurrency 1``, GuideLLM ``synchronous``, AIPerf
  ``--concurrency 1``: the same load, so the same label);
- ``4/c2``: 4 requests/s offered with at most 2 in flight;
- ``unrecorded``: the file does not say (AIPerf's per-request records without the export
  beside them).

Burstiness (vLLM's gamma shape: 1 is Poisson) does not change the label but is carried into
the report: two runs that differ in it differ in setup.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Load:
    request_rate: float | None  # requests/s offered; inf: no pacing; None: not recorded
    max_concurrency: int | None = None  # requests in flight at most; None: no limit
    burstiness: float | None = None  # vLLM's gamma shape (1.0: Poisson); None: not recorded
    recorded: bool = True

    @property
    def label(self) -> str:
        if not self.recorded:
            return "unrecorded"
        rate = self.request_rate
        paced = rate is not None and math.isfinite(rate)
        conc = f"c{self.max_concurrency}" if self.max_concurrency else None
        if paced and conc:
            return f"{rate:g}/{conc}"
        if paced:
            return f"{rate:g}"
        return conc or "inf"

    def as_dict(self) -> dict[str, Any]:
        rate = self.request_rate
        return {
            "label": self.label,
            "request_rate": None if rate is None or math.isinf(rate) else rate,
            "unlimited_rate": rate is not None and math.isinf(rate),
            "max_concurrency": self.max_concurrency,
            "burstiness": self.burstiness,
        }


UNRECORDED = Load(None, recorded=False)
