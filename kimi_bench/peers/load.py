"""The load a peer tool offered, as its file records it: request rate, concurrency limit,
burstiness and warm-up, each either recorded or **not recorded** (never guessed), and the
one label every format gets for it.

Labels (the ``rate`` of the imported report's rows; ``compare`` matches rows by it and a
rules table names it, ``[serve_ab.c1]``):

- ``inf``: everything sent at once, no concurrency limit (a burst);
- ``4``: 4 requests/s offered, no concurrency limit;
- ``c1``: at most 1 request in flight, sent as fast as that allows (sglang/vLLM
  ``--request-rate inf --max-concurrency 1``, GuideLLM ``synchronous``, AIPerf
  ``--concurrency 1``: the same load, so the same label);
- ``4/c2``: 4 requests/s offered with at most 2 in flight;
- ``unrecorded``: the file does not record the rate or the concurrency limit (AIPerf's
  per-request records without the export beside them, or a file with the field removed).

Two loads are the same when they mean the same (:meth:`Load.meaning`): burstiness (vLLM's
gamma shape: 1 is Poisson) shapes the gaps between arrivals, so it matters only at a
finite rate; at an unlimited rate there are no gaps to shape. Warm-up is carried and shown,
not part of the meaning (the tools measure after it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kimi_bench.ci.comparable import UNRECORDED

FIELDS = ("request_rate", "max_concurrency", "burstiness", "warmup")


@dataclass(frozen=True)
class Load:
    request_rate: float | None  # requests/s offered; inf: no pacing; None: not recorded
    max_concurrency: int | None = None  # requests in flight at most; None: no limit
    burstiness: float | None = None  # vLLM's gamma shape (1.0: Poisson)
    warmup: str | None = None  # what the tool ran before measuring ("none", "1 request")
    # the fields the file does not record (their value above is then meaningless)
    unrecorded: frozenset[str] = field(default_factory=frozenset)

    @property
    def recorded(self) -> bool:
        """The rate and the concurrency limit are both recorded (the label is known)."""
        return not ({"request_rate", "max_concurrency"} & self.unrecorded)

    @property
    def paced(self) -> bool:
        rate = self.request_rate
        return "request_rate" not in self.unrecorded and rate is not None and math.isfinite(rate)

    @property
    def label(self) -> str:
        if not self.recorded:
            return UNRECORDED
        conc = f"c{self.max_concurrency}" if self.max_concurrency else None
        if self.paced and conc:
            return f"{self.request_rate:g}/{conc}"
        if self.paced:
            return f"{self.request_rate:g}"
        return conc or "inf"

    def meaning(self) -> tuple[Any, ...]:
        """What two loads must share to be the same load (burstiness only when paced)."""
        burst = self.value("burstiness") if self.paced else "irrelevant (unlimited rate)"
        return (self.label, burst)

    def value(self, name: str) -> Any:
        """A field's value, or the words "not recorded"."""
        return "not recorded" if name in self.unrecorded else getattr(self, name)

    def as_dict(self) -> dict[str, object]:
        """The load as the report's ``config.load`` holds it (JSON)."""
        rate = self.request_rate
        known = "request_rate" not in self.unrecorded
        return {
            "label": self.label,
            "request_rate": None if not known or rate is None or math.isinf(rate) else rate,
            "unlimited_rate": known and rate is not None and math.isinf(rate),
            "max_concurrency": self.max_concurrency,
            "burstiness": self.burstiness,
            "warmup": self.warmup,
            "not_recorded": sorted(self.unrecorded),
        }

    def text(self) -> str:
        """The load in words, every field named, "not recorded" where the file is silent."""
        if "request_rate" in self.unrecorded:
            rate = "not recorded"
        else:
            rate = f"{self.request_rate:g} requests/s" if self.paced else "unlimited"
        conc = self.value("max_concurrency")
        conc = "no limit" if conc is None else conc
        burst = self.value("burstiness")
        if burst is None:
            burst = "none (no pacing)" if not self.paced else "not recorded"
        elif not ({"burstiness", "request_rate"} & self.unrecorded or self.paced):
            burst = f"{burst:g} (irrelevant at an unlimited rate)"
        elif isinstance(burst, float):
            burst = f"{burst:g}"
        warm = self.value("warmup")
        return (
            f"label {self.label}: request rate {rate}, max concurrency {conc}, "
            f"burstiness {burst}, warm-up {warm if warm is not None else 'not recorded'}"
        )
