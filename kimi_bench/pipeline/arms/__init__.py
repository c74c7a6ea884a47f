"""The arm registry: each arm is an object (:class:`Arm`) chosen once by name, whose
methods are the pipeline steps it chooses and whose class attributes declare what it
needs. Built in: ``eager`` (the baseline), ``deferred`` (the change), ``zero-copy`` and
``deferred-decode`` (both proposed, not in the runtime), and ``vllm-uint8`` (vLLM 0.33's path,
under the ``vllm-0.33`` runtime profile only). Adding an arm: a module that
calls ``register_arm``, and its name in the options (``options.Arm`` and
``options.ARM_MODULES``); the registry imports the module the first time the arm is
asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kimi_bench.infra.registry import Registry
from kimi_bench.options import ARM_MODULES
from kimi_bench.pipeline.arms.base import PROPOSED, Arm, Role, UnknownArm
from kimi_bench.pipeline.arms.deferred import Deferred
from kimi_bench.pipeline.arms.deferred_decode import DeferredDecode
from kimi_bench.pipeline.arms.eager import Eager
from kimi_bench.pipeline.arms.vllm import Vllm
from kimi_bench.pipeline.arms.zero_copy import ZeroCopy

__all__ = ["PROPOSED", "Arm", "Role", "UnknownArm", "arm", "arms", "register_arm", "with_role"]

ARMS: Registry[Arm] = Registry(
    lambda name, known: UnknownArm(f"unknown arm {name!r}; expected one of {known}"), ARM_MODULES
)


def register_arm(name: str, factory: Callable[[str], Arm]) -> None:
    """Make ``name`` an arm: ``factory(name)`` builds its object on first use."""
    ARMS.register(name, factory)


register_arm("eager", Eager)
register_arm("deferred", Deferred)
register_arm("zero-copy", ZeroCopy)
register_arm("deferred-decode", DeferredDecode)
register_arm("vllm-uint8", Vllm)


def arm(name: str) -> Arm:
    """The arm called ``name`` (its module is imported on first use)."""
    return ARMS.get(name)


def arms(names: Iterable[str]) -> list[Arm]:
    return [arm(n) for n in names]


def with_role(names: Iterable[str], role: Role) -> str | None:
    """The name of the arm among ``names`` that plays ``role`` (None: none does)."""
    return next((n for n in names if arm(n).role == role), None)
