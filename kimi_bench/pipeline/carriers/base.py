"""What a carrier is: the producer side (``wrap``), the scheduler's broadcast, a rank's
``take``, and what it declares about itself (segments, nodes, the ledger ops it writes)
so that nothing outside its module asks for its name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from kimi_bench.domain.contract import MMItem
from kimi_bench.pipeline.step import Step
from kimi_bench.pipeline.steps import deserialize, serialize


class UnknownCarrier(ValueError):
    pass


class Carrier:
    """One transport between the producer and the scheduler ranks.

    Declared: ``uses_segments`` (features go through POSIX shared memory, so ranks take
    them after a barrier and unlink after another), ``spans_nodes`` (works when the ranks
    are on several hosts), ``serialize_op`` (the ledger op that moves a feature's bytes at
    the producer: ``shm_copy_in`` or ``pickle``), ``runtime`` (the installed SGLang's own
    functions do the work), ``broadcasts_in_turn`` (its broadcast also runs with every
    rank in one process, ``recipe.InTurn``: it then gets a list as ``group``),
    ``ipc_mirrors`` (what the hop to rank 0 mirrors, in the ledger)."""

    uses_segments: ClassVar[bool] = False
    spans_nodes: ClassVar[bool] = True
    serialize_op: ClassVar[str] = "pickle"
    runtime: ClassVar[bool] = False
    broadcasts_in_turn: ClassVar[bool] = False
    ipc_mirrors: ClassVar[str] = "send_pyobj to scheduler rank 0"

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # ---------------------------------------------------------------- process set-up
    def require(self) -> None:
        """Cheap check in the parent process (nothing heavy imported): raise with an
        install hint when the carrier cannot run here."""

    def check(self, arms: Sequence[Any], runtime: str) -> None:
        """ValueError (a usage error) when this carrier cannot carry these arms (objects)
        under this runtime profile."""

    def prepare(self) -> None:
        """Once per process, before anything is timed (e.g. load a runtime)."""

    def note(self) -> str | None:
        """The report's note about this carrier (None: nothing to say)."""
        return None

    def leftovers(self, pids: Iterable[int]) -> list[str]:
        """Remove segments this carrier's own code made in these processes (after a run
        or a crash); kimi-bench's own segments go with the run's prefix."""
        return []

    def segment_prefixes(self, pids: Iterable[int]) -> list[str]:
        """Name prefixes of segments made outside the run's prefix (the report keeps them)."""
        return []

    # ---------------------------------------------------------------------- steps
    def wrap(self, step: Step, items: list[MMItem], prefix: str) -> Any:
        """Producer side: what travels in place of ``items`` (CPU tensor features only;
        other features, e.g. zero-copy's arena slots, pass as they are)."""
        raise NotImplementedError

    def encode(self, step: Step, payload: Any) -> list[Any]:
        """The frames of the hop to scheduler rank 0 (bytes-like): one pickle
        (``send_pyobj``)."""
        return [serialize(step, payload, "serialize", "send_pyobj")]

    def decode(self, step: Step, get: Callable[[], Any], stage: str, mirrors: str) -> Any:
        """The object back from the frames ``get`` hands out, one per call."""
        return deserialize(step, get(), stage, mirrors)

    def broadcast(self, step: Step, obj: Any, rank: int, world: int, group: Any = None) -> Any:
        """The scheduler's ``broadcast_pyobj`` of ``obj`` from rank 0; every rank returns it."""
        raise NotImplementedError

    def take(self, step: Step, packed: Any) -> tuple[list[MMItem], list[str]]:
        """A rank's items out of what it received, and the segment names to unlink."""
        raise NotImplementedError

    def holds_segments(self, packed: Any) -> bool:
        """``packed`` carries shared-memory segments (ranks take them after a barrier)."""
        return False
