"""Read what the figures and the HTML page need out of a report dict.

Every figure reads the report through these functions only. They take the plain dict of
``Report.to_dict()`` in the current layout: a report read from a file was brought to it
by ``report.migrate`` (older key names are handled there, once, not here). None of them
raises on a missing block: they return empty lists or ``None`` and the figure says
"no data".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kimi_bench.report.migrate import rate_label as _rate_label
from kimi_bench.report.roles import baseline_arm

Dict = dict[str, Any]


def _or(v: Any, default: float) -> float:
    f = number(v)
    return default if f is None else f


def sub(block: Any, key: str) -> Dict:
    """``block[key]`` when it is a dict, else an empty dict (a missing or odd block)."""
    value = block.get(key) if isinstance(block, dict) else None
    return value if isinstance(value, dict) else {}


def number(v: Any) -> float | None:
    """A finite float, or None for null / NaN / non-numbers (a hostile report stays drawable)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


# --------------------------------------------------------------------- environment / caption


def kind(report: Dict) -> str:
    return str(report.get("kind", "?"))


def commit(report: Dict) -> str:
    git = report.get("environment", {}).get("git") or {}
    c = str(git.get("commit") or "?")[:12]
    return c + ("+dirty" if git.get("dirty") else "")


def device(report: Dict) -> str:
    env = report.get("environment", {})
    name, dev = env.get("device_name"), env.get("device")
    return f"{name} ({dev})" if name and dev and name != dev else str(name or dev or "?")


def preset(report: Dict) -> str:
    return str(report.get("environment", {}).get("preset") or "?")


def ranks(report: Dict) -> str:
    r = report.get("config", {}).get("ranks")
    return "?" if r is None else str(r)


def carrier(report: Dict) -> str:
    return str(report.get("config", {}).get("transport") or "n/a")


def caption(report: Dict) -> str:
    """One line naming what produced the numbers: device, preset, ranks, carrier, commit."""
    env = report.get("environment", {})
    parts = [
        device(report),
        f"preset {preset(report)}",
        f"{ranks(report)} ranks",
        f"carrier {carrier(report)}",
        f"commit {commit(report)}",
    ]
    if env.get("torch"):
        parts.append(f"torch {env['torch']}")
    if env.get("created"):
        parts.append(str(env["created"]))
    return " · ".join(parts)


def verdict(report: Dict) -> str:
    return str(report.get("summary", {}).get("verdict") or "")


def notes(report: Dict) -> list[str]:
    return [str(n) for n in report.get("notes") or []]


NOISE_PREFIX = "noisy: "


def reader_notes(report: Dict) -> list[str]:
    """The notes as a page lists them: a micro report's per-stage noise warnings
    (``noisy: <arm>/<stage>: ...``) are left out, as its noise table (after the figures)
    shows them grouped per arm."""
    out = notes(report)
    if report.get("arms"):
        out = [n for n in out if not n.startswith(NOISE_PREFIX)]
    return out


# --------------------------------------------------------------------------------- micro


@dataclass(frozen=True)
class Spread:
    """Median with p10/p90 of one measured quantity (ms)."""

    median: float
    p10: float
    p90: float


@dataclass(frozen=True)
class StageStat:
    arm: str
    stage: str
    spread: Spread | None  # None: the stage does not apply to this arm / was not measured
    bytes: int


def _spread(summary: Any, samples: Any) -> Spread | None:
    """From a summary's median/p10/p90 when it has a median, else from the raw samples."""
    if isinstance(summary, dict) and number(summary.get("median")) is not None:
        med = _or(summary.get("median"), 0.0)
        return Spread(med, _or(summary.get("p10"), med), _or(summary.get("p90"), med))
    xs = [x for x in map(number, samples if isinstance(samples, list) else []) if x is not None]
    if not xs:
        return None
    p10, med, p90 = np.percentile(xs, [10, 50, 90])
    return Spread(float(med), float(p10), float(p90))


def spread_of(stage: Any) -> Spread | None:
    """Median/p10/p90 of a stage block: its ``summary_ms``, else from its ``samples_ms``."""
    if not isinstance(stage, dict):
        return None
    return _spread(stage.get("summary_ms"), stage.get("samples_ms"))


def measurement_spread(m: Any) -> Spread | None:
    """Median/p10/p90 of a measurement (``arms.<arm>.total_ms``): it is its own summary."""
    return _spread(m, m.get("samples")) if isinstance(m, dict) else None


def micro_arms(report: Dict) -> list[str]:
    return list((report.get("arms") or {}).keys())


def micro_stages(report: Dict) -> list[StageStat]:
    """Per arm, per stage (in the report's order): median/p10/p90 ms and bytes moved."""
    out = []
    for arm, block in (report.get("arms") or {}).items():
        for stage, st in (block.get("stages") or {}).items():
            applicable = st.get("applicable", True)
            sp = spread_of(st) if applicable else None
            out.append(StageStat(arm, stage, sp, int(number(st.get("bytes")) or 0)))
    if out:
        return out
    for row in report.get("results") or []:  # fall back to the flat table
        if row.get("stage") in (None, "TOTAL"):
            continue
        med = number(row.get("median_ms"))
        sp = None
        if med is not None:
            sp = Spread(med, _or(row.get("p10_ms"), med), _or(row.get("p90_ms"), med))
        out.append(StageStat(str(row["arm"]), str(row["stage"]), sp, int(row.get("bytes") or 0)))
    return out


def micro_total(report: Dict, arm: str) -> Spread | None:
    block = (report.get("arms") or {}).get(arm) or {}
    return measurement_spread(block.get("total_ms"))


def floor_ms(report: Dict) -> float | None:
    """The measured floor; the summary's copy when the raw one is missing."""
    top = number(report.get("floor_ms"))
    return top if top is not None else number(report.get("summary", {}).get("floor_ms"))


@dataclass(frozen=True)
class Span:
    lane: str  # "producer", "rank 0", ...
    stage: str
    start_ms: float
    end_ms: float


def micro_timeline(report: Dict, arm: str) -> tuple[list[Span], bool]:
    """Spans of one repeat of ``arm`` and whether they are per rank.

    Per-rank form (``report["timeline"][arm]["ranks"]``, each with ``rank``/``lane`` and
    ``spans`` of ``stage``/``start_ms``/``end_ms``) when the report has it; otherwise the
    stages of the median-total repeat laid end to end on one lane (``per_rank`` False).
    """
    tl = (report.get("timeline") or {}).get(arm)
    if isinstance(tl, dict) and tl.get("ranks"):
        spans = []
        for lane in tl["ranks"]:
            name = str(lane.get("lane") or f"rank {lane.get('rank', '?')}")
            for s in lane.get("spans") or []:
                a, b = number(s.get("start_ms")), number(s.get("end_ms"))
                if a is not None and b is not None:
                    spans.append(Span(name, str(s.get("stage")), a, b))
        return spans, True
    reps = [r for r in (report.get("repeats") or {}).get(arm) or [] if isinstance(r, dict)]
    reps = [r for r in reps if number(r.get("total_ms")) is not None]
    if not reps:
        return [], False
    reps.sort(key=lambda r: number(r["total_ms"]) or 0.0)
    rep = reps[len(reps) // 2]
    t, spans = 0.0, []
    for stage, ms in (rep.get("stage_ms") or {}).items():
        v = number(ms)
        if v is not None:
            spans.append(Span("stages in sequence", stage, t, t + v))
            t += v
    return spans, False


# --------------------------------------------------------------------------------- serve


def serve_rates(report: Dict) -> list[str]:
    """Offered rates as category labels, in the run's order ("2", "8", "inf")."""
    return [_rate_label(r) for r in report.get("summary", {}).get("rates") or []]


def offered_rate(label: str) -> float | None:
    """req/s offered at a rate category; None for "inf" (all requests at once)."""
    try:
        v = float(label)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def serve_arms(report: Dict) -> list[str]:
    return [str(a) for a in report.get("config", {}).get("arms") or []]


def base_arm(report: Dict) -> str:
    """What a serve-ab report compares every arm with (``roles.baseline_arm``: the baseline
    arm among emulated arms, else the first: the first ``--endpoint``, the first imported
    file)."""
    arms = serve_arms(report)
    return baseline_arm(report.get("config", {}), arms) or ""


def serve_row(report: Dict, arm: str, rate: str) -> Dict:
    for r in report.get("results") or []:
        if str(r.get("arm")) == arm and _rate_label(r.get("rate")) == rate:
            return dict(r)
    return {}


# --------------------------------------------------------------------------------- parity


@dataclass(frozen=True)
class ParityRow:
    name: str
    size: str
    fp32: bool | None
    bf16: bool | None
    deferred: bool | None
    diff_vs_pil: float | None
    error: str | None


def parity_rows(report: Dict) -> list[ParityRow]:
    out = []
    for r in report.get("results") or []:
        w, h = r.get("width"), r.get("height")

        def flag(key: str, row: Dict = r) -> bool | None:
            v = row.get(key)
            return v if isinstance(v, bool) else None

        out.append(
            ParityRow(
                name=str(r.get("name", "?")),
                size=f"{w}x{h}" if w and h else "",
                fp32=flag("bit_exact_fp32"),
                bf16=flag("bit_exact_bf16"),
                deferred=flag("deferred"),
                diff_vs_pil=number(r.get("max_abs_diff_vs_pil")),
                error=str(r["error"]) if r.get("error") else None,
            )
        )
    return out
