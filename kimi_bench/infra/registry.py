"""A registry of named objects (arms, carriers, decoders): a factory is registered under
each name, and the object is built from it the first time the name is asked for, then
kept. A name that is not registered yet but listed in ``modules`` is registered by
importing its module (a plug-in registers itself on import), so that module loads only
when a run asks for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Named objects built once from their factories.

    ``unknown`` builds the error for a name nobody registered, from the name and the names
    known (registered, then those of ``modules``, comma-separated). ``modules`` maps a
    name to the module that registers it, read when the name is asked for (a mapping the
    options own: the registry keeps a reference, not a copy)."""

    def __init__(
        self, unknown: Callable[[str, str], Exception], modules: Mapping[str, str] | None = None
    ) -> None:
        self._unknown = unknown
        self._modules: Mapping[str, str] = modules if modules is not None else {}
        self._factories: dict[str, Callable[[str], T]] = {}
        self._made: dict[str, T] = {}

    def register(self, name: str, factory: Callable[[str], T]) -> None:
        """Make ``name`` known: ``factory(name)`` builds its object on first use (an
        object built under the name before is dropped)."""
        self._factories[name] = factory
        self._made.pop(name, None)

    def factory(self, name: str) -> Callable[[str], T] | None:
        """The factory registered under ``name`` (None: none is)."""
        return self._factories.get(name)

    def known(self) -> list[str]:
        """Every name that can be asked for: the registered ones, then the modules'."""
        return list(dict.fromkeys([*self._factories, *self._modules]))

    def get(self, name: str) -> T:
        """The object called ``name``, built on first use (its module imported first when
        it registers itself); the ``unknown`` error for a name nobody registers."""
        if name in self._made:
            return self._made[name]
        if name not in self._factories and name in self._modules:
            importlib.import_module(self._modules[name])  # registers it
        factory = self._factories.get(name)
        if factory is None:
            raise self._unknown(name, ", ".join(self.known()))
        made = self._made[name] = factory(name)
        return made
