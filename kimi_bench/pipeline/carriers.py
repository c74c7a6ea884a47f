"""The carrier registry: which steps a transport uses. kimi-bench's own (``shm``,
``pickle``: ``wrap``, ``broadcast``, ``take`` in :mod:`.steps`) are registered here; the
installed SGLang runtime's (``sglang-shm``, ``sglang-pickle``) register themselves from
:mod:`kimi_bench.sglang_ref.carriers` (same signatures, same ledger ops, the runtime's
functions doing the work). Adding a carrier: a module that calls ``register_carrier``, and
its name in ``options.MicroCarrier`` and ``options.CARRIER_MODULES`` (the registry imports
the module the first time the carrier is asked for)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kimi_bench.domain.contract import MMItem
from kimi_bench.options import CARRIER_MODULES
from kimi_bench.pipeline.steps import broadcast, take, wrap
from kimi_bench.pipeline.transport import ShmRef


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


# name -> factory of its steps. kimi-bench's own carriers are here; other modules register
# theirs (``kimi_bench.sglang_ref.carriers`` adds the installed runtime's ``sglang-shm`` and
# ``sglang-pickle`` when it is imported), so the pipeline never imports them.
_REGISTRY: dict[str, Callable[[str], CarrierSteps]] = {}


def register_carrier(name: str, factory: Callable[[str], CarrierSteps]) -> None:
    """Make ``name`` a transport: ``factory(name)`` builds its steps on first use."""
    _REGISTRY[name] = factory


def _own(name: str) -> CarrierSteps:
    return CarrierSteps(name, wrap, broadcast, take, _own_segments)


register_carrier("shm", _own)
register_carrier("pickle", _own)


def carrier_steps(transport: str) -> CarrierSteps:
    """The steps of ``transport``. A registered factory may load a runtime on first use
    (seconds): call this once before anything is timed."""
    if transport not in _REGISTRY and transport in CARRIER_MODULES:
        importlib.import_module(CARRIER_MODULES[transport])  # registers it (may need sglang)
    factory = _REGISTRY.get(transport)
    if factory is None:
        known = ", ".join([*_REGISTRY, *CARRIER_MODULES])
        raise ValueError(f"unknown transport {transport!r}; known: {known}")
    return factory(transport)
