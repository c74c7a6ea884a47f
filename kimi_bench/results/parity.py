"""parity's results: one row per input (``ParityRow``, the fields its verdicts rest on) and
what the summary states from them (``ParityDerived``), derived once by ``derive_parity``.

A row with an ``error`` was rejected; an accepted row carries the main arms' verdicts:
``bit_exact_bf16`` always, ``bit_exact_fp32`` exactly when the runtime has FP32 features
(SGLang: every accepted row has one; vLLM normalises on the device: none has one). Rows
may carry the deferred-decode arm's verdicts (``decode_*``) and other arms' (``arms``); an
input that differs in any of them is in ``differing`` (main arms, then the decode arm,
then arm by arm); ``exactness_differing`` counts the main arms only (the gate's
``all_bit_exact``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from kimi_bench.results.base import ResultError, typed_records


class ArmVerdict(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    bit_exact_fp32: bool
    bit_exact_bf16: bool


class ParityRow(BaseModel):
    """The fields of a parity row its figures are derived from (the rest is kept as is)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    name: str
    error: str | None = None
    bit_exact_fp32: bool | None = None
    bit_exact_bf16: bool | None = None
    deferred: bool | None = None
    max_abs_diff_vs_pil: float | None = None
    decode_path: str | None = None
    decode_bit_exact_fp32: bool | None = None
    decode_bit_exact_bf16: bool | None = None
    arms: dict[str, ArmVerdict] | None = None

    @model_validator(mode="after")
    def _accepted_has_a_verdict(self) -> ParityRow:
        if self.error is None and self.bit_exact_bf16 is None:
            raise ValueError("an accepted input needs bit_exact_bf16 (true or false)")
        return self

    @property
    def accepted(self) -> bool:
        return self.error is None

    @property
    def exact(self) -> bool:
        """The main arms' features equal (an FP32 verdict of None: the runtime has none)."""
        return bool(self.bit_exact_bf16) and self.bit_exact_fp32 is not False

    @property
    def decode_exact(self) -> bool:
        return self.decode_path is None or bool(
            self.decode_bit_exact_fp32 and self.decode_bit_exact_bf16
        )

    def arm_exact(self, arm: str) -> bool:
        v = (self.arms or {})[arm]
        return v.bit_exact_fp32 and v.bit_exact_bf16


def has_fp32(config: Any) -> bool:
    """Whether the report's runtime has FP32 features: every runtime but vLLM (a report
    without its runtime profile predates vLLM's: SGLang)."""
    profile = config.get("runtime_profile") if isinstance(config, dict) else None
    return not (isinstance(profile, dict) and profile.get("runtime") == "vllm")


@dataclass(frozen=True)
class ParityDerived:
    inputs: int
    accepted: int
    errors: int
    deferred: int
    rejected: tuple[str, ...]
    # every accepted input's FP32 features equal; None: the runtime has no FP32 features
    all_bit_exact_fp32: bool | None
    all_bit_exact_bf16: bool
    exactness_differing: tuple[str, ...]  # the main arms' FP32 or BF16 differ, row order
    differing: tuple[str, ...]  # ... or the deferred-decode arm's, or another arm's
    max_abs_diff_vs_pil: float | None

    @property
    def all_bit_exact(self) -> bool:
        return self.accepted > 0 and not self.exactness_differing

    def summary_fields(self) -> dict[str, Any]:
        """The summary's keys these figures fill, as the report writes them."""
        return {
            "inputs": self.inputs,
            "accepted": self.accepted,
            "errors": self.errors,
            "deferred": self.deferred,
            "all_bit_exact_fp32": self.all_bit_exact_fp32,
            "all_bit_exact_bf16": self.all_bit_exact_bf16,
            "differing": list(self.differing),
        }

    def disagreement(self, summary: dict[str, Any]) -> str | None:
        """The first figure of a stated ``summary`` that disagrees with these (an absent
        figure: nothing to check), named, or None."""
        for key, want in self.summary_fields().items():
            stated = summary.get(key)
            if stated is None:
                continue
            if key == "differing":
                ok = isinstance(stated, list) and sorted(map(str, stated)) == sorted(want)
            elif isinstance(want, bool) or want is None:
                ok = stated is want
            else:  # a count: 27.0 is 27, a flag is not
                ok = stated == want and not isinstance(stated, bool)
            if not ok:
                return f"summary.{key} says {stated!r} but the rows give {want!r}"
        return None


def parity_rows(records: Any, fp32: bool = True) -> list[ParityRow]:
    """A report's ``results`` as typed rows (ResultError naming ``results[i].field``);
    ``fp32``: whether the runtime has FP32 features (``has_fp32``), so that every accepted
    row must carry an FP32 verdict (True) or none may (False)."""
    rows = typed_records(records, ParityRow, "results")
    for i, r in enumerate(rows):
        if r.accepted and (r.bit_exact_fp32 is None) == fp32:
            want = "needs bit_exact_fp32 (true or false)" if fp32 else "has no FP32 features"
            raise ResultError(
                f"results[{i}].bit_exact_fp32 is {r.bit_exact_fp32!r}, but the runtime {want}"
            )
    return rows


def derive_parity(rows: list[ParityRow], fp32: bool = True) -> ParityDerived:
    """The summary's figures from rows ``parity_rows`` checked with the same ``fp32``."""
    ok = [r for r in rows if r.accepted]
    exactness = tuple(r.name for r in ok if not r.exact)
    arms = dict.fromkeys(a for r in ok for a in r.arms or {})
    more = [r.name for r in ok if not r.decode_exact] + [
        r.name for a in arms for r in ok if a in (r.arms or {}) and not r.arm_exact(a)
    ]
    diffs = [r.max_abs_diff_vs_pil for r in ok if r.max_abs_diff_vs_pil is not None]
    return ParityDerived(
        inputs=len(rows),
        accepted=len(ok),
        errors=len(rows) - len(ok),
        deferred=sum(1 for r in ok if r.deferred),
        rejected=tuple(r.name for r in rows if not r.accepted),
        all_bit_exact_fp32=(bool(ok) and all(r.bit_exact_fp32 for r in ok)) if fp32 else None,
        all_bit_exact_bf16=bool(ok) and all(r.bit_exact_bf16 for r in ok),
        exactness_differing=exactness,
        differing=tuple(dict.fromkeys([*exactness, *more])),
        max_abs_diff_vs_pil=max(diffs) if diffs else None,
    )
