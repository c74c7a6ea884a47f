"""Stand-ins for the ``pickle`` and ``torch.distributed`` module globals of the runtime's
``broadcast_pyobj`` (``carriers.broadcast``): each forwards every call and keeps what it
saw (the pickles, the broadcast tensors), so the ledger counts and sizes what the
runtime's own code did."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from kimi_bench.sglang_ref.calls import _patched
from kimi_bench.sglang_ref.runtime import COMMON, Runtime


class PickleSpy:
    """Stands in for ``pickle`` inside ``broadcast_pyobj``: forwards, keeps each blob."""

    def __init__(self) -> None:
        self.dumped: list[bytes] = []
        self.loaded: list[Any] = []

    def dumps(self, obj: Any, *args: Any, **kwargs: Any) -> bytes:
        blob = pickle.dumps(obj, *args, **kwargs)
        self.dumped.append(blob)
        return blob

    def loads(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        self.loaded.append(data)
        return pickle.loads(data, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(pickle, name)


class DistSpy:
    """Stands in for ``torch.distributed`` inside ``broadcast_pyobj``: forwards, keeps
    every broadcast tensor."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.sent: list[torch.Tensor] = []

    def broadcast(self, tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        out = self.dist.broadcast(tensor, *args, **kwargs)
        self.sent.append(tensor)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dist, name)


def address(data: Any) -> int:
    return int(np.frombuffer(data, dtype=np.uint8).ctypes.data) if len(data) else 0


@contextlib.contextmanager
def spied(rt: Runtime) -> Iterator[tuple[PickleSpy, DistSpy]]:
    common = rt.modules[COMMON]
    spies = (PickleSpy(), DistSpy())
    with _patched(common, "pickle", spies[0]), _patched(common, "dist", spies[1]):
        yield spies
