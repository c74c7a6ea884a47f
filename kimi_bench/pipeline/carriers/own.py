"""kimi-bench's own carriers, as the runtime's CPU feature transport moves features:
``shm`` (one node: ``ShmPointerMMData``) and ``pickle`` (inline bytes, several nodes).
Their byte moves are the pipeline's steps (``steps.wrap_shm``, ``steps.broadcast``,
``steps.take``)."""

from __future__ import annotations

from typing import Any

from kimi_bench.domain.contract import MMItem
from kimi_bench.pipeline.carriers.base import Carrier
from kimi_bench.pipeline.step import Step
from kimi_bench.pipeline.steps import broadcast, take, wrap_shm
from kimi_bench.pipeline.transport import ShmRef


class _Own(Carrier):
    def broadcast(self, step: Step, obj: Any, rank: int, world: int, group: Any = None) -> Any:
        return broadcast(step, obj, rank, world, group)

    def take(self, step: Step, packed: Any) -> tuple[list[MMItem], list[str]]:
        return take(step, list(packed))


class ShmCarrier(_Own):
    """One node: each CPU feature copied once into a POSIX shared-memory segment."""

    uses_segments = True
    spans_nodes = False
    serialize_op = "shm_copy_in"

    def wrap(self, step: Step, items: list[MMItem], prefix: str) -> Any:
        return wrap_shm(step, items, prefix)

    def holds_segments(self, packed: Any) -> bool:
        return any(isinstance(it.feature, ShmRef) for it in packed)


class PickleCarrier(_Own):
    """Features pickled inline, as they are (a view keeps its strides)."""

    def wrap(self, step: Step, items: list[MMItem], prefix: str) -> Any:
        return list(items)
