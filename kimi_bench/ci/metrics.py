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

from kimi_bench.domain.stages import STAGES
from kimi_bench.infra.stats import median
from kimi_bench.options import Arm
from kimi_bench.report.agree_serve import derive_report
from kimi_bench.report.model import Report
from kimi_bench.report.roles import DEFAULT_ROLES, baseline_arm, change_arm
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


def higher_is_better(metric: str) -> bool:
    """Baseline metrics (``micro.speedup``) and history series (``speedup_median``,
    ``bytes_ratio``): speedups, ratios and throughputs are better when higher."""
    return metric.rpartition(".")[2].startswith("speedup") or metric.endswith(
        ("_ratio", "req_per_s", "throughput")
    )


def eager_time_metric(report: Report) -> str | None:
    """The baseline (eager) arm's own total, ``micro.<eager>.total_ms``."""
    arms = [str(a) for a in report.config.get("arms") or report.data.get("repeats") or {}]
    base = baseline_arm(report.config, arms)
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
        arms = [str(a) for a in report.config.get("arms") or report.data.get("repeats") or {}]
        arm = change_arm(report.config, arms)
        return f"micro.{arm}.total_ms" if arm else None
    if len(parts) == 3 and parts[2] == "over_yardstick":
        return f"micro.{parts[1]}.total_ms"
    return None


def metric_samples(report: Report, metric: str) -> list[float]:
    """Raw samples of a named metric (KeyError when the report does not hold it). Reads
    the raw blocks (repeats, request rows), never the summary."""
    parts = metric.split(".")
    if parts[0] == "micro" and report.kind == "micro":
        reps = report.data.get("repeats") or {}
        arms = [str(a) for a in report.config.get("arms") or reps]
        base = baseline_arm(report.config, arms) or ""
        if parts[1:] == ["speedup"]:
            eager, deferred = reps[base], reps[change_arm(report.config, arms) or ""]
            return [e["total_ms"] / d["total_ms"] for e, d in zip(eager, deferred, strict=True)]
        if len(parts) == 3:
            recs = reps[parts[1]]
            if parts[2] == "over_control":
                rounds = (report.data.get("control_repeats") or {})[parts[1]]
                control = median([float(r["total_ms"]) for r in rounds])
                return [float(r["total_ms"]) / control for r in recs]
            if parts[2] == "over_yardstick":
                return _over_yardstick(report, recs, base)
            if parts[2] == "total_ms":
                return [float(r["total_ms"]) for r in recs]
            stage = parts[2].removesuffix("_ms")
            return [float(r["stage_ms"][stage]) for r in recs]
    if parts[0] == "serve_ab" and report.kind == "serve-ab" and len(parts) == 4:
        derived = derive_report(report.config, report.summary, report.data["requests"])
        return derived.cell(parts[1], parts[2]).samples(SAMPLED[parts[3]])
    raise KeyError(metric)


def _over_yardstick(report: Report, recs: list[dict], base: str) -> list[float]:
    """Each repeat's total over sqrt(the same repeat's baseline (eager) total x the
    baseline's control rounds' median): see the module docstring (KeyError when a part is
    missing)."""
    eager = (report.data.get("repeats") or {})[base]
    rounds = (report.data.get("control_repeats") or {})[base]
    control = median([float(r["total_ms"]) for r in rounds])
    if len(recs) != len(eager) or not control > 0 or any(e["total_ms"] <= 0 for e in eager):
        raise KeyError("over_yardstick")
    return [
        float(r["total_ms"]) / math.sqrt(float(e["total_ms"]) * control)
        for r, e in zip(recs, eager, strict=True)
    ]
