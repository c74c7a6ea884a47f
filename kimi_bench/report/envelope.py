"""The envelope every report shares, typed: the number types the kinds' models use,
``Environment`` (where the numbers come from), ``RunConfig`` (what the run was asked for,
as readers share it), ``Header`` (what any report dict's title, caption and notes are read
from, never refusing one) and ``Envelope`` (a Header whose blocks are checked: the generic
loaded report each kind's model in ``report.kinds`` extends).

``Loose`` fields are read for display or comparison only: a value of another type reads
as missing instead of refusing the report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

# JSON has no NaN/inf (reports write null), but a reader turns 1e999 into inf: refused.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
NonNeg = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
# a relative change in percent: nothing drops by more than all of it
Percent = Annotated[float, Field(strict=True, ge=-100, allow_inf_nan=False)]
Count = Annotated[int, Field(strict=True, ge=0)]
Flag = Annotated[bool, Field(strict=True)]
# a number as written (infinity too): a statistic the read check compares, naming it
Real = Annotated[float, Field(strict=True)]
Text = Annotated[str, Field(strict=True)]
# raw samples (ms): every entry a number, none missing
Samples = list[NonNeg]


def _or_none(value: object, handler: ValidatorFunctionWrapHandler, _: ValidationInfo) -> object:
    try:
        return handler(value)
    except ValidationError:
        return None


V = TypeVar("V")
# A field read for display or comparison only: a value of another type reads as missing
# (None) instead of refusing the report, as an older or foreign writer may differ.
Loose = Annotated[V | None, WrapValidator(_or_none)]


class Open(BaseModel):
    """A block that may hold fields this version does not read."""

    model_config = ConfigDict(extra="allow")


# ------------------------------------------------------------------------------ envelope


class Git(Open):
    commit: Loose[str] = None
    dirty: Loose[bool] = None


class HostLoad(Open):
    """The host's load at the run's start and end (``infra.hostload``)."""

    warning: Loose[str] = None
    start: Loose[dict[str, Any]] = None


class Environment(Open):
    """Where the numbers come from; every field optional (imported reports lack some)."""

    package_version: Text | None = None
    python: Text | None = None
    torch: Text | None = None
    cuda: Text | None = None
    device: Text | None = None
    device_name: Text | None = None
    gpu_count: Count | None = None
    cpu_count: Count | None = None
    git: Git | None = None
    seed: Count | None = None
    created: Text | None = None
    host_load: HostLoad | None = None
    preset: Loose[str] = None
    platform: Loose[str] = None


class Load(Open):
    """A serve-ab run's offered load (``config.load``)."""

    label: Loose[str] = None
    request_rate: Loose[float] = None
    unlimited_rate: Loose[bool] = None
    burstiness: Loose[float] = None
    not_recorded: list[Loose[str]] = Field(default_factory=list)


class Source(Open):
    """Where an imported report's numbers come from (``peers.report``)."""

    tools: Loose[list[Any]] = None
    arms: Loose[dict[str, Any]] = None  # per arm: the file it was read from


class Preprocess(Open):
    name: Loose[str] = None


class Decoding(Open):
    """How the run decoded its images (``config.decoding``)."""

    decoder: Loose[str] = None


class RunConfig(Open):
    """What the run was asked for, as every kind's readers share it; the options' dump
    differs between versions and kinds, so each field reads as missing when absent or of
    another type, and the rest stays as written (extra fields)."""

    ranks: Loose[int | list[int]] = None
    transport: Loose[str] = None
    arms: list[Loose[str]] = Field(default_factory=list)
    preset: Loose[str] = None
    imported: Loose[bool] = None
    source: Loose[Source] = None
    endpoints: Loose[list[Any]] = None
    preprocess: Loose[Preprocess] = None
    images: Loose[str] = None
    policy: Loose[str] = None
    decoder: Loose[str] = None
    decoding: Loose[Decoding] = None
    eager_baseline: Loose[str] = None
    rates: Loose[list[Any]] = None
    rate_labels: Loose[list[Any]] = None
    load: Loose[Load] = None
    arm_roles: Loose[dict[str, Any]] = None
    carrier_traits: Loose[dict[str, Any]] = None
    runtime: Loose[str] = None
    device: Loose[str] = None
    nodes: Loose[int] = None
    nnodes: Loose[int] = None
    groups: Loose[list[Any]] = None
    # what the run planned (the read check refuses more raw records than these)
    repeats: Loose[Count] = None
    control_repeats: Loose[Count] = None
    launches: Loose[Count] = None
    requests: Loose[Count] = None
    per_request: Loose[Flag] = None
    goodput: Loose[str | list[Any]] = None


class Summary(Open):
    verdict: Text | None = None
    error: Text | None = None


def _or_default(make: Callable[[], object]) -> WrapValidator:
    def wrap(value: object, handler: ValidatorFunctionWrapHandler, _: ValidationInfo) -> object:
        try:
            return handler(value)
        except ValidationError:
            return make()

    return WrapValidator(wrap)


class Header(Open):
    """What every report's title, caption and notes are read from (``report.access``):
    any report dict validates, a partial or hostile one too (a figure of one stays
    drawable), with a block that does not fit read as absent. ``Envelope`` is a Header
    whose blocks are checked."""

    kind: Annotated[str, _or_default(lambda: "?")] = "?"
    environment: Annotated[Environment, _or_default(Environment)] = Field(
        default_factory=Environment
    )
    config: Annotated[RunConfig, _or_default(RunConfig)] = Field(default_factory=RunConfig)
    summary: Annotated[Summary, _or_default(Summary)] = Field(default_factory=Summary)
    notes: Annotated[list[str], _or_default(list)] = Field(default_factory=list)


class Envelope(Header):
    """The fields every report shares. ``config`` is the options' dump as the run wrote it:
    it differs between versions and kinds, so only what readers share is typed
    (``RunConfig``); the rest stays as written."""

    schema_version: Annotated[int, Field(strict=True, ge=1)]
    kind: Text
    final: Flag | None = None
    environment: Environment = Field(default_factory=Environment)
    config: RunConfig = Field(default_factory=RunConfig)
    summary: Summary = Field(default_factory=Summary)
    notes: list[Text] = Field(default_factory=list)
    results: list[dict[str, Any]] = Field(default_factory=list)
