"""Gate rules: one typed model (pydantic) that a rules TOML file is validated by.

Every value is checked before any report is read: types (a bool where a bool belongs, no
string numbers), finite numbers (TOML's ``nan``/``inf`` are refused), ranges (``alpha`` in
(0, 1), ``max_regression`` >= 0, TTFT/throughput deltas in [-1, 10]), known tables and keys
(unknown ones are errors, never silently ignored), rate tables named by a rate label
(``2``, ``8.5``, ``inf``) and baseline metric names. A problem becomes :class:`RulesError`
naming the file, the table and the key, which the CLI turns into exit code 2.

``inconclusive`` is the policy for a rule whose measured interval straddles its
threshold (the run cannot tell pass from fail): ``warn`` (default) passes the rule with a
note, ``fail`` fails it.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kimi_bench.ci.metrics import figure_problem, metric_problem
from kimi_bench.infra.jsonio import InputError, parse_toml
from kimi_bench.infra.limits import MAX_CONFIG_BYTES, read_text_or
from kimi_bench.options import MicroCarrier

CARRIERS: tuple[str, ...] = typing.get_args(MicroCarrier)

# a rate table's name: a request rate, inf (a burst), c<N> (at most N in flight), a rate
# with a concurrency limit (4/c2), or unrecorded (imported files: ``peers.load``)
RATE_LABEL = re.compile(r"^(inf|unrecorded|c[0-9]+|[0-9]+(\.[0-9]+)?(/c[0-9]+)?)$")
Delta = Annotated[float, Field(ge=-1.0, le=10.0)]  # a fraction: -0.4 = -40%


class RulesError(ValueError):
    """A rules file that cannot be used."""


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class ParityRules(_Rules):
    all_bit_exact: bool | None = Field(
        None, description="Every input identical in FP32 and BF16 (a rejected input fails it "
        "unless max_rejected allows it)."
    )  # fmt: skip
    max_rejected: Annotated[int, Field(ge=0)] | None = Field(
        None, description="Inputs all_bit_exact may leave uncompared (rejected: unreadable, "
        "over a limit); default 0."
    )  # fmt: skip


class MicroRules(_Rules):
    min_speedup: Annotated[float, Field(gt=0, le=1e6)] | None = Field(
        None, description="Median eager/deferred total (paired per repeat) at least this."
    )
    max_floor_ratio: Annotated[float, Field(gt=0, le=1e6)] | None = Field(
        None, description="Deferred median total over the floor at most this."
    )
    min_bytes_ratio: Annotated[float, Field(ge=0, le=1e6)] | None = Field(
        None, description="Eager moves at least this many times the deferred bytes."
    )
    bit_exact: bool | None = Field(None, description="Owner BF16 identical in every repeat.")
    min: dict[str, float] | None = Field(
        None, description="A figure the summary states, by its name (deferred_median_ms, "
        "speedup_median...: results.micro_figures.FIGURES), at least this."
    )  # fmt: skip
    max: dict[str, float] | None = Field(
        None, description="A figure the summary states, by its name, at most this."
    )

    @field_validator("min", "max", mode="before")
    @classmethod
    def _figures(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        for name in v:
            problem = figure_problem(name)
            if problem:
                raise ValueError(problem)
        return {k: _as_float(x) for k, x in v.items()}

    @field_validator("min_speedup", "max_floor_ratio", "min_bytes_ratio", mode="before")
    @classmethod
    def _int_is_float(cls, v: Any) -> Any:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


Ms = Annotated[float, Field(gt=0, le=1e7)]


class RateRules(_Rules):
    max_median_ttft_delta: Delta | None = Field(
        None, description="Each arm's median TTFT vs the first arm's, at most this (a fraction)."
    )
    max_p90_ttft_delta: Delta | None = Field(
        None, description="Each arm's p90 TTFT vs the first arm's, at most this (a fraction)."
    )
    min_throughput_delta: Delta | None = Field(
        None, description="Each arm's throughput vs the first arm's, at least this (a fraction)."
    )
    min_goodput_delta: Delta | None = Field(
        None, description="The change arm's goodput vs the baseline's (a fraction)."
    )
    # absolute limits every arm at the rate must meet (a report without the data: refused)
    min_goodput: Annotated[float, Field(ge=0, le=1e7)] | None = Field(
        None, description="Requests per second that meet every --goodput SLO, at least this."
    )
    max_p99_ttft_ms: Ms | None = Field(None, description="Every arm's p99 TTFT at most this.")
    max_p99_itl_ms: Ms | None = Field(None, description="Every arm's p99 ITL at most this.")
    max_p99_tpot_ms: Ms | None = Field(None, description="Every arm's p99 TPOT at most this.")
    max_p99_e2e_ms: Ms | None = Field(None, description="Every arm's p99 E2E at most this.")

    @model_validator(mode="before")
    @classmethod
    def _ints(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: _as_float(v) for k, v in data.items()}
        return data


class ServeRules(_Rules):
    max_failed: Annotated[int, Field(ge=0)] | None = Field(
        None, description="Failed requests (all rates and arms) at most this."
    )
    rates: dict[str, RateRules] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _rate_tables(cls, data: Any) -> Any:
        """``[serve_ab.inf]`` tables become ``rates["inf"]``; a rate must be a label."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        rates = {k: data.pop(k) for k in list(data) if isinstance(data[k], dict)}
        for label in rates:
            if not RATE_LABEL.match(label):
                raise ValueError(
                    f"[serve_ab.{label}]: a rate table is named 2, 8.5, inf, c4 or 4/c2"
                )
        return {**data, "rates": rates}


Regression = Annotated[float, Field(ge=0, le=10)]


class BaselineRules(_Rules):
    max_regression: Regression = Field(
        default=0.10,
        description=(
            "A metric fails when its median got worse by more than this fraction "
            "(and the rank test agrees)."
        ),
    )
    alpha: Annotated[float, Field(gt=0, lt=1)] = Field(
        default=0.05, description="The one-sided Mann-Whitney U test's p must be below this."
    )
    metrics: tuple[str, ...] = Field(
        default=(),
        description="Baseline metrics to hold against the baseline report (gate.md lists them).",
    )
    # a metric's own max_regression (what `kimi-bench calibrate` measured it needs), and
    # optionally one per carrier ("micro.speedup@pickle"); metrics not listed use
    # max_regression
    thresholds: dict[str, Regression] = Field(
        default_factory=dict,
        description='A metric\'s own max_regression, or one per carrier ("METRIC@pickle").',
    )

    def threshold(self, metric: str, carrier: str | None = None) -> float:
        """The metric's threshold for a report of ``carrier``: ``metric@carrier``, else
        ``metric``, else max_regression."""
        if carrier is not None and f"{metric}@{carrier}" in self.thresholds:
            return self.thresholds[f"{metric}@{carrier}"]
        return self.thresholds.get(metric, self.max_regression)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: _as_float(v) if k not in ("metrics", "thresholds") else v
                    for k, v in data.items()}  # fmt: skip
            if isinstance(data.get("metrics"), list):
                data["metrics"] = tuple(data["metrics"])
            if isinstance(data.get("thresholds"), dict):
                data["thresholds"] = {k: _as_float(v) for k, v in data["thresholds"].items()}
        return data

    @model_validator(mode="after")
    def _thresholds_of_gated_metrics(self) -> BaselineRules:
        for key in self.thresholds:
            metric, _, carrier = key.partition("@")
            if metric not in self.metrics:
                raise ValueError(
                    f"thresholds names {metric!r}, which is not in metrics {list(self.metrics)}"
                )
            if "@" in key and carrier not in CARRIERS:
                raise ValueError(
                    f"thresholds names carrier {carrier!r} ({key!r}); carriers: "
                    f"{', '.join(CARRIERS)}"
                )
        return self

    @field_validator("metrics")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for metric in v:
            problem = metric_problem(metric)
            if problem:
                raise ValueError(problem)
        return v


class GateRules(_Rules):
    parity: ParityRules | None = None
    micro: MicroRules | None = None
    serve_ab: ServeRules | None = None
    baseline: BaselineRules | None = None
    inconclusive: Literal["warn", "fail"] = Field(
        default="warn",
        description="A rule whose interval straddles its limit: a note, or a failure.",
    )

    def count(self) -> int:
        """How many rules the file sets (the always-applied checks not included)."""
        n = 0
        for part in (self.parity, self.micro, self.serve_ab, self.baseline):
            if part is None:
                continue
            if isinstance(part, BaselineRules):
                n += len(part.metrics)
                continue
            dumped = part.model_dump(exclude={"rates"}, exclude_none=True)
            n += len(dumped)
            if isinstance(part, ServeRules):
                n += sum(len(r.model_dump(exclude_none=True)) for r in part.rates.values())
        return n


def _as_float(v: Any) -> Any:
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _where(loc: tuple[Any, ...]) -> str:
    parts = [str(x) for x in loc if str(x) != "rates"]
    if len(parts) >= 2 and parts[0] == "serve_ab" and RATE_LABEL.match(parts[1]):
        return f"[serve_ab.{parts[1]}] " + ".".join(parts[2:]) if parts[2:] else parts[1]
    if not parts:
        return "(file)"
    table = f"[{parts[0]}]"
    return f"{table} {'.'.join(parts[1:])}".strip()


def _message(exc: ValidationError, path: Path) -> str:
    lines = []
    for err in exc.errors():
        where = _where(tuple(err["loc"]))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown rule or table"
        elif err["type"] in ("model_type", "dict_type"):
            msg = f"must be a table, got {err.get('input')!r}"
        elif err["type"] == "finite_number":
            msg = f"must be a finite number, got {err.get('input')!r}"
        lines.append(f"{path}: {where}: {msg}")
    return "; ".join(lines)


def parse_rules(raw: object, path: Path) -> GateRules:
    """Rules read from a file (any parsed TOML), validated into ``GateRules``."""
    try:
        return GateRules.model_validate(raw)
    except ValidationError as exc:
        raise RulesError(_message(exc, path)) from None


def load_rules(path: str | Path) -> GateRules:
    """Read and validate a rules file (RulesError names the file, table and key)."""
    p = Path(path)
    text = read_text_or(RulesError, p, MAX_CONFIG_BYTES, "rules file")
    try:
        raw = parse_toml(text, str(p))
    except InputError as exc:
        raise RulesError(str(exc)) from None
    return parse_rules(raw, p)
