"""What an arm is: a choice of the pipeline's steps (how the producer decides, produces
and packs; which model class the scheduler sees) and what it declares about itself, so
that the sequence (``pipeline.recipe``) and the scenarios never ask for its name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from kimi_bench.domain.contract import MMItem
from kimi_bench.domain.navit import ResizePlan
from kimi_bench.domain.policy import Decision, PolicyMode, decide_images
from kimi_bench.domain.scheduler import PRESET_MODEL_CLASS
from kimi_bench.pipeline.decode import decode_input
from kimi_bench.pipeline.step import RankOutput, Step
from kimi_bench.pipeline.steps import produce, rank_step

# the role an arm plays in a comparison: every other arm is compared with the baseline;
# the gate's headline figures (micro.speedup, the serve-ab deltas) follow the change
Role = Literal["baseline", "change"] | None
PROPOSED = "proposed, not in the runtime"
DEFERRED_MODEL_CLASS = "KimiK3ForConditionalGeneration"
# the eager baseline's scheduler before the change: a model class off the whitelist
NOT_WHITELISTED_MODEL_CLASS = "EagerBaselineModel"


class UnknownArm(ValueError):
    pass


class Arm:
    """One arm of the pipeline. Declared:

    - ``role``: "baseline" (eager), "change" (deferred) or None;
    - ``label``: "" for the runtime's own paths, ``PROPOSED`` for arms not in the runtime;
    - ``needs_arena``: the producer writes into the run's shared-memory arena;
    - ``encoded_inputs``: the producer gets images encoded and ships them encoded (the
      scenarios then give every arm of the run the same encoded inputs);
    - ``in_process``: parity can run it in one process;
    - ``whitelisted``: the scheduler's model class is on the pre-embed whitelist (no
      pre-embed move);
    - ``ledger_ops``: the ledger operations only this arm writes."""

    role: ClassVar[Role] = None
    label: ClassVar[str] = ""
    needs_arena: ClassVar[bool] = False
    encoded_inputs: ClassVar[bool] = False
    in_process: ClassVar[bool] = True
    whitelisted: ClassVar[bool] = True
    ledger_ops: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def proposed(self) -> bool:
        return bool(self.label)

    def model_class(self, preset: str, baseline_whitelisted: bool = False) -> str:
        """The scheduler's model class for this arm: the preset's own (whitelisted), or a
        class off the pre-embed whitelist (the runtime before the change) for the
        baseline, unless ``baseline_whitelisted`` (the same runtime with deferral off)."""
        if not self.whitelisted and not (self.role == "baseline" and baseline_whitelisted):
            return NOT_WHITELISTED_MODEL_CLASS
        return PRESET_MODEL_CLASS.get(preset, DEFERRED_MODEL_CLASS)

    # ----------------------------------------------------------------- producer
    def load(self, step: Step, data: bytes) -> Any:
        """A request's encoded image as this arm's producer holds it: decoded as the
        runtime's ``load_image`` does (``step.decoder``), in the ledger."""
        return decode_input(step, data, None, "producer")

    def decide(
        self,
        step: Step,
        images: Sequence[Any],
        plans: Sequence[ResizePlan],
        *,
        scope: PolicyMode | None = None,
        owner_can_materialize: bool = True,
    ) -> list[Decision]:
        """The deferral decision of one request's images (the policy's)."""
        return decide_images(
            images,
            plans,
            mode=scope or step.profile.decision_scope,
            owner_can_materialize=owner_can_materialize,
        )

    def produce(
        self,
        step: Step,
        images: Sequence[Any],
        plans: Sequence[ResizePlan],
        decisions: Sequence[Decision],
    ) -> list[MMItem]:
        """The producer step (marks ``producer`` and ``d2h``)."""
        return produce(step, images, plans, decisions)

    def pack(self, step: Step, items: list[MMItem], prefix: str) -> Any:
        """What travels to the scheduler: the carrier's wrap of the items."""
        return step.carrier.wrap(step, items, prefix)

    # ----------------------------------------------------------------- ranks
    def rank_step(
        self,
        step: Step,
        items: list[MMItem],
        rank: int,
        world: int,
        decode_errors: list[tuple[int, str]] | None = None,
    ) -> RankOutput:
        """A scheduler rank's step on the items it took (``steps.rank_step``)."""
        return rank_step(step, items, rank, world, decode_errors)
