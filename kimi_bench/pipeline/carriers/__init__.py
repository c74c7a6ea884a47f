"""The carrier registry: how features travel from the producer to the scheduler ranks.

A carrier is an object (:class:`Carrier`) chosen once by name; the pipeline's sequence
(``pipeline.recipe``) calls its steps and never asks which one it has. kimi-bench's own
(``shm``, ``pickle``: :mod:`.own`) are registered here; the installed SGLang runtime's
(``sglang-shm``, ``sglang-pickle``) register themselves from
:mod:`kimi_bench.sglang_ref.carriers`. Adding a carrier: a module that calls
``register_carrier``, and its name in the options (``options.MicroCarrier`` /
``options.Carrier`` and ``options.CARRIER_MODULES``); the registry imports the module the
first time the carrier is asked for."""

from __future__ import annotations

from collections.abc import Callable

from kimi_bench.infra.registry import Registry
from kimi_bench.options import CARRIER_MODULES
from kimi_bench.pipeline.carriers.base import Carrier, UnknownCarrier
from kimi_bench.pipeline.carriers.own import PickleCarrier, ShmCarrier

__all__ = ["Carrier", "UnknownCarrier", "carrier", "register_carrier"]

# name -> factory of its carrier object (built on first use, then kept)
CARRIERS: Registry[Carrier] = Registry(
    lambda name, known: UnknownCarrier(f"unknown transport {name!r}; known: {known}"),
    CARRIER_MODULES,
)


def register_carrier(name: str, factory: Callable[[str], Carrier]) -> None:
    """Make ``name`` a carrier: ``factory(name)`` builds its object on first use. The
    factory must be cheap (no runtime import): a carrier that needs one loads it in
    :meth:`Carrier.prepare`."""
    CARRIERS.register(name, factory)


register_carrier("shm", lambda name: ShmCarrier(name))
register_carrier("pickle", lambda name: PickleCarrier(name))


def carrier(name: str) -> Carrier:
    """The carrier called ``name`` (its module is imported on first use)."""
    return CARRIERS.get(name)
