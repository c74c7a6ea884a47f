"""Which arm of a report plays which role, and what its carrier does, read from the report
(never from the arms' or carriers' names): micro and serve-ab reports record
``config.arm_roles`` (the baseline every other arm is compared with, the change the gate's
headline figures follow) and ``config.carrier_traits`` from the objects that ran
(``bench/variants.py``). Reports written before they did are read by the roles and traits
those runs had, named here once: eager was the baseline and deferred the change (with
endpoints or imported files: the first one was the baseline), and a carrier used shared-
memory segments when it was shm (kimi-bench's or the runtime's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kimi_bench.report.envelope import Open, RunConfig

# the roles and the carriers' traits of reports written before they were recorded
DEFAULT_ROLES: dict[str, str] = {"baseline": "eager", "change": "deferred"}
EARLIER_SEGMENT_CARRIERS = ("shm", "sglang-shm")
# a report's config: typed, or as written (a JSON object, read as ``RunConfig``)
Config = RunConfig | Mapping[str, object]


def typed_config(config: Config) -> RunConfig:
    """``config`` as ``RunConfig`` (validated when given as written)."""
    return config if isinstance(config, RunConfig) else RunConfig.model_validate(config)


def _recorded(config: RunConfig, role: str) -> str | None:
    value = (config.arm_roles or {}).get(role)
    return None if value is None else str(value)


def baseline_arm(config: Config, arms: Sequence[str]) -> str | None:
    """The arm every other arm is compared with (None: no arm)."""
    cfg = typed_config(config)
    recorded = _recorded(cfg, "baseline")
    if recorded is not None or "arm_roles" in cfg.model_fields_set:
        return recorded
    earlier = DEFAULT_ROLES["baseline"]
    emulated = not (cfg.endpoints or cfg.imported)
    return earlier if earlier in arms and emulated else next(iter(arms), None)


def change_arm(config: Config, arms: Sequence[str]) -> str | None:
    """The arm the gate's headline figures follow (None: the run had none)."""
    cfg = typed_config(config)
    if "arm_roles" in cfg.model_fields_set:
        return _recorded(cfg, "change")
    earlier = DEFAULT_ROLES["change"]
    return earlier if earlier in arms else None


class Traits(Open):
    """What a run's carrier does (``config.carrier_traits``)."""

    name: str | None = None
    uses_segments: bool  # features cross in shared-memory segments
    spans_nodes: bool
    serialize_op: str  # the ledger op that moves a feature at the producer


def carrier_traits(config: Config) -> Traits:
    """What the run's carrier does: recorded by the run, or (an earlier report) what its
    carrier did then."""
    cfg = typed_config(config)
    traits = cfg.carrier_traits
    if traits is not None and "uses_segments" in traits:
        return Traits.model_validate(traits)
    segments = str(cfg.transport) in EARLIER_SEGMENT_CARRIERS
    return Traits(
        name=None if cfg.transport is None else str(cfg.transport),
        uses_segments=segments,
        spans_nodes=not segments,
        serialize_op="shm_copy_in" if segments else "pickle",
    )
