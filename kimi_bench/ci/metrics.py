"""Named metrics that relative (baseline) rules and the run history compare, and where a
report keeps their raw samples.

    micro.speedup | micro.<arm>.total_ms | micro.<arm>.<stage>_ms |
    micro.<arm>.over_control | micro.<arm>.over_yardstick | serve_ab.<rate>.<arm>.ttft_ms

``micro.<arm>.over_control`` is each repeat's total over the median of the same arm's
control rounds in the same run (the pipeline with no pixels to speak of): how many control
planes one request's images cost. A host that is slower or faster as a whole moves both,
so the ratio drifts less between machines than a time does; a slower payload path raises
it. Lower is better.

``micro.<arm>.over_yardstick`` is each repeat's total over a yardstick measured in the same
run on paths the arm's code does not touch: the geometric mean of the same repeat's EAGER
total and the median of the EAGER arm's control rounds. A host that is uniformly faster
or slower cancels out (the ratio has degree 0); a host whose payload path alone is slower
(memory bandwidth) moves eager and the arm alike, and the ratio by only the square root
of it; while a change that makes the arm slower moves the ratio by all of it (the eager
yardstick does not move). Across the committed H200 machines it drifts less than either
ratio above (``reports/calibration/h200-cross/``). Lower is better.

Names are checked when the rules are loaded, so a typo is an error, never a silent skip.
"""

from __future__ import annotations

import math
import re
import typing

from kimi_bench.ci.evidence import Derived
from kimi_bench.domain.stages import STAGES
from kimi_bench.options import Arm
from kimi_bench.report.model import Report
from kimi_bench.report.roles import DEFAULT_ROLES, baseline_arm, change_arm
from kimi_bench.results.micro import MicroDerived
from kimi_bench.results.micro_figures import FIGURES, figure_named
from kimi_bench.results.serve import SAMPLED

ARMS: tuple[str, ...] = typing.get_args(Arm)
KIND_TABLE = {"parity": "parity", "micro": "micro", "serve-ab": "serve_ab"}
GATED_KINDS = tuple(KIND_TABLE)
_METRIC = re.compile(
    r"^(micro\.speedup"
    r"|micro\.(?P<arm>[a-z][a-z0-9_-]*)\.((?P<stage>[a-z0-9_]+)_ms|over_control|over_yardstick)"
    r"|serve_ab\.(?P<rate>inf|c[0-9]+|[0-9]+(\.[0-9]+)?(/c[0-9]+)?)\.(?P<sarm>[a-z][a-z0-9_-]*)"
    r"\.ttft_ms)$"
)


def metric_problem(metric: object) -> str | None:
    """Why a metric name cannot be gated, or None when it is known."""
    if not isinstance(metric, str):
        return f"metric names are strings, got {metric!r}"
    m = _METRIC.match(metric)
    if m is None:
        return (
            f"unknown metric {metric!r}; expected micro.speedup, micro.<arm>.total_ms, "
            "micro.<arm>.<stage>_ms, micro.<arm>.over_control, micro.<arm>.over_yardstick or "
            "serve_ab.<rate>.<arm>.ttft_ms"
        )
    arm = m.group("arm")
    if arm is not None and arm not in ARMS:
        return f"unknown arm {arm!r} in metric {metric!r}; arms: {', '.join(ARMS)}"
    if arm == DEFAULT_ROLES["baseline"] and metric.endswith(".over_yardstick"):
        return f"{metric!r}: the yardstick is the eager arm itself; use another arm"
    stage = m.group("stage")
    if stage is not None and stage != "total" and stage not in STAGES:
        return f"unknown stage {stage!r} in metric {metric!r}; stages: total, {', '.join(STAGES)}"
    return None


def figure_problem(name: object) -> str | None:
    """Why a micro figure name (``[micro.min]``/``[micro.max]``) cannot be gated, or None
    when ``results.micro_figures.FIGURES`` names it for some arm."""
    if not isinstance(name, str) or figure_named(name, ARMS) is None:
        return (
            f"unknown micro figure {name!r}; figures: "
            + ", ".join(f.name for f in FIGURES)
            + " ({arm}: an arm with '_' for '-'; {pair}: <arm>_vs_<base>)"
        )
    return None


def higher_is_better(metric: str) -> bool:
    """Baseline metrics (``micro.speedup``) and history series (``speedup_median``,
    ``bytes_ratio``): speedups, ratios and throughputs are better when higher."""
    return metric.rpartition(".")[2].startswith("speedup") or metric.endswith(
        ("_ratio", "req_per_s", "throughput")
    )


def _arms(report: Report) -> list[str]:
    arms = report.header.config.arms or list(report.data.get("repeats") or {})
    return [str(a) for a in arms]


def eager_time_metric(report: Report) -> str | None:
    """The baseline (eager) arm's own total, ``micro.<eager>.total_ms``."""
    base = baseline_arm(report.config, _arms(report))
    return f"micro.{base}.total_ms" if base else None


def own_time_metric(report: Report, metric: str) -> str | None:
    """For a metric that also moves with the eager arm (``micro.speedup``: eager over the
    change arm; ``micro.<arm>.over_yardstick``: over an eager yardstick), the measured
    arm's own total (``micro.<arm>.total_ms``): such a metric's regression is not one of
    the arm when the eager arm got faster and the arm itself did not get slower
    (``ci.baseline``). None for every other metric."""
    parts = metric.split(".")
    if report.kind != "micro" or parts[0] != "micro":
        return None
    if parts[1:] == ["speedup"]:
        arm = change_arm(report.config, _arms(report))
        return f"micro.{arm}.total_ms" if arm else None
    if len(parts) == 3 and parts[2] == "over_yardstick":
        return f"micro.{parts[1]}.total_ms"
    return None


def metric_samples(source: Report | Derived, metric: str) -> list[float]:
    """Raw samples of a named metric (KeyError when the report does not hold it): a micro
    report's per-repeat figures (``results.micro``), a serve-ab report's request rows;
    never the summary. ``source``: a report, or one whose figures were derived already."""
    derived = source if isinstance(source, Derived) else Derived(source)
    parts, kind = metric.split("."), derived.report.kind
    if parts[0] == "micro" and kind == "micro":
        d = derived.micro
        if parts[1:] == ["speedup"]:
            if d.headline is None:
                raise KeyError(metric)
            return list(d.headline.ratio.samples)
        if len(parts) == 3:
            return _micro_samples(d, parts[1], parts[2])
    if parts[0] == "serve_ab" and kind == "serve-ab" and len(parts) == 4:
        return derived.serve.cell(parts[1], parts[2]).samples(SAMPLED[parts[3]])
    raise KeyError(metric)


def _micro_samples(d: MicroDerived, arm: str, name: str) -> list[float]:
    """``micro.<arm>.<name>``: each repeat's total, a stage, or a ratio (module docstring;
    KeyError when a part is missing)."""
    totals = d.arms[arm].total.samples
    if name == "total_ms":
        return list(totals)
    if name == "over_control":
        control = d.arms[arm].control_ms
        if control is None:
            raise KeyError(name)
        return [x / control for x in totals]
    if name == "over_yardstick":
        eager = d.arms[d.baseline]
        control = eager.control_ms
        if control is None or len(totals) != eager.total.n or not control > 0:
            raise KeyError(name)
        if any(e <= 0 for e in eager.total.samples):
            raise KeyError(name)
        return [
            x / math.sqrt(e * control) for x, e in zip(totals, eager.total.samples, strict=True)
        ]
    return list(d.arms[arm].stages[name.removesuffix("_ms")].samples)
