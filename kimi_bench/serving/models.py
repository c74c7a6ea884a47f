"""The model names the server answers to, as vLLM's ``--served-model-name NAME [NAME ...]``:
the first is the model's name (``/v1/models`` lists it first; every response carries it,
as vLLM's do), the others are aliases. A request without a model is served (vLLM does the
same); a request for any other name is refused with vLLM's 404 (``NotFoundError``,
``param: model``) unless ``accept_any`` is set: then it is served as SGLang serves any name
(SGLang does not check it), and the server logs one warning per distinct unknown name."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kimi_bench.serving.intake import Refused
from kimi_bench.serving.openai_types import ModelCard


class ServedModels:
    def __init__(self, names: Sequence[str], accept_any: bool = False) -> None:
        unique = tuple(dict.fromkeys(names))  # order kept: the first is the model's name
        if not unique or not all(isinstance(n, str) and n.strip() for n in unique):
            raise ValueError(f"served model names must be non-empty strings, got {names!r}")
        self.names, self.accept_any = unique, accept_any
        self._warned: set[str] = set()
        self._lock = threading.Lock()  # admit runs in worker threads

    @property
    def name(self) -> str:
        return self.names[0]

    def admit(self, requested: str | None) -> str | None:
        """Whether a request for ``requested`` runs: Refused (404) for an unknown name
        unless ``accept_any``; then the name itself, the first time only (to warn about
        once), else None."""
        if not requested or requested in self.names:
            return None
        if not self.accept_any:
            served = ", ".join(repr(n) for n in self.names)
            raise Refused(
                404,
                "unknown_model",
                f"The model `{requested}` does not exist. (serving {served}; kimi-bench "
                "serve --served-model-name NAME adds a name, --accept-any-model serves any)",
                kind="NotFoundError",
                param="model",
            )
        with self._lock:
            if requested in self._warned:
                return None
            self._warned.add(requested)
        return requested

    def cards(self) -> list[ModelCard]:
        """``/v1/models`` entries: one per name, each alias rooted at the model's name."""
        return [
            {"id": n, "object": "model", "created": 0, "owned_by": "kimi-bench", "root": self.name}
            for n in self.names
        ]
