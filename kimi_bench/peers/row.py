"""One request as a peer's result file records it (the readers build it, ``figures``
checks it, ``report`` writes it as a request row)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class PeerRow(BaseModel):
    """One request as a peer's file records it; the fields its reader set (and only those)
    are the imported report's request row (``columns``)."""

    rid: int  # its place in the file
    request_id: Any = None  # the tool's own identity (AIPerf, GuideLLM), as written
    error: str | None = None
    ttft_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_ms: list[float] | None = None
    input_tokens: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None

    def columns(self) -> dict[str, object]:
        return self.model_dump(exclude_unset=True)
