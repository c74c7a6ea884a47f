"""What a process chooses once (``recipe.choose_once``) makes the same steps as choosing by
name for every step (``recipe.make_step``), and a rank's per-repeat marks
(``micro_messages.rank_marks``) hold every arm's owner output against the baseline's with
``torch.equal``."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kimi_bench.domain.config import get_preset
from kimi_bench.domain.decoders import choose
from kimi_bench.domain.runtime import get_profile
from kimi_bench.engine.micro_messages import rank_marks
from kimi_bench.pipeline import ClockHook, RankOutput, RankResult, arm, carrier, make_step
from kimi_bench.pipeline.recipe import choose_once

K3 = get_preset("kimi-k3")
CPU = torch.device("cpu")
ARMS = ("eager", "deferred", "zero-copy", "deferred-decode")


@pytest.mark.parametrize("runtime", ["sglang-0.5.23", "pr-33921"])
@pytest.mark.parametrize("transport", ["shm", "pickle"])
def test_choose_once_makes_the_steps_make_step_makes(runtime: str, transport: str) -> None:
    chosen = choose_once(ARMS, transport, runtime, "auto", CPU)
    assert chosen.carrier is carrier(transport)
    assert chosen.profile == get_profile(runtime)
    assert chosen.decoder.summary() == choose("auto", get_profile(runtime), CPU).summary()
    for name in ARMS:
        assert chosen.arms[name] is arm(name)
        one = chosen.step(name, K3, CPU, baseline_whitelisted=True)
        other = make_step(name, K3, CPU, carrier_=transport, runtime=runtime,
                          decoder=chosen.decoder, baseline_whitelisted=True)  # fmt: skip
        fields = [f.name for f in dataclasses.fields(one) if f.name not in ("ledger", "hook")]
        assert {f: getattr(one, f) for f in fields} == {f: getattr(other, f) for f in fields}
        assert type(one.ledger) is type(other.ledger) and one.ledger.rows() == []
        assert type(one.hook) is type(other.hook)


def test_every_step_gets_its_own_ledger() -> None:
    chosen = choose_once(("eager",), "pickle", None, "auto", CPU)
    a, b = chosen.step("eager", K3, CPU), chosen.step("eager", K3, CPU)
    assert a.ledger is not b.ledger and a.trail is not b.trail


def _result(tower: torch.Tensor | None) -> RankResult:
    owned = [0] if tower is not None else []
    return RankResult(RankOutput([0], owned, None, tower), None)


def _marks(name: str, tower: torch.Tensor | None, reference: dict, offset: float = 0.0):
    chosen = choose_once((name,), "pickle", None, "auto", CPU)
    step = chosen.step(name, K3, CPU, hook=ClockHook(CPU))
    step.hook.mark("owner_h2d")
    return step, rank_marks(step, _result(tower), None, offset, reference)


def test_the_baseline_sets_the_reference_and_others_are_held_against_it() -> None:
    reference: dict = {}
    tower = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    step, base = _marks("eager", tower, reference, offset=2.5)
    assert base["bit_exact"] is None and base["bit_exact_fp32"] is None
    assert reference["bf16"] is tower
    assert base["marks"]["owner_h2d"] == step.hook.marks["owner_h2d"] + 2.5
    assert _marks("deferred", tower.clone(), reference)[1]["bit_exact"] is True
    changed = tower.clone()
    changed[1, 2] = 100
    assert _marks("deferred", changed, reference)[1]["bit_exact"] is False


def test_a_rank_that_owns_nothing_is_exact_only_when_the_baseline_owned_nothing() -> None:
    reference: dict = {}
    _marks("eager", None, reference)
    none = _marks("zero-copy", None, reference)[1]
    assert none["bit_exact"] is True and none["bit_exact_fp32"] is True
    extra = _marks("zero-copy", torch.zeros(1, 4, dtype=torch.bfloat16), reference)[1]
    assert extra["bit_exact"] is False
