"""Which carrier steps a transport uses: kimi-bench's own (``shm``, ``pickle``: ``wrap``,
``broadcast``, ``take`` in :mod:`.steps`) or the installed SGLang runtime's
(``sglang-shm``, ``sglang-pickle``: :mod:`kimi_bench.sglang_ref.carriers`, same signatures,
same ledger ops, the runtime's functions doing the work)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kimi_bench.contract import MMItem
from kimi_bench.pipeline.steps import broadcast, take, wrap
from kimi_bench.transport import ShmRef

OWN = ("shm", "pickle")
RUNTIME = ("sglang-shm", "sglang-pickle")


@dataclass(frozen=True)
class CarrierSteps:
    """One transport's carrier steps. ``holds_segments(received)``: the received object
    carries shared-memory segments, so ranks take them after a barrier and unlink after
    another (the scheduler's barrier before ``unwrap_shm_features``)."""

    transport: str
    wrap: Callable[..., Any]
    broadcast: Callable[..., Any]
    take: Callable[..., tuple[list[MMItem], list[str]]]
    holds_segments: Callable[[Any], bool]


def _own_segments(items: Any) -> bool:
    return any(isinstance(it.feature, ShmRef) for it in items)


def carrier_steps(transport: str) -> CarrierSteps:
    """The steps of ``transport``. A runtime carrier loads sglang on first use (seconds):
    call this once before anything is timed; later calls are cached lookups."""
    if transport in OWN:
        return CarrierSteps(transport, wrap, broadcast, take, _own_segments)
    if transport in RUNTIME:
        from kimi_bench.sglang_ref.carriers import runtime_steps

        return runtime_steps(transport)
    raise ValueError(f"unknown transport {transport!r}; expected one of {', '.join(OWN + RUNTIME)}")
