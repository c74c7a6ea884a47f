"""Derived blocks against the raw data they came from, checked when a report is read.

A report carries raw data (micro: one record per arm and repeat; serve-ab: one row per
request; parity: one row per input) and blocks derived from it (per-stage samples and
their summaries, totals, speedups, medians, byte counts, per-rate rows, A/B deltas, the
summary). Every consumer reads the derived blocks (figures, HTML, ``compare``, the gate),
so a report whose derived blocks disagree with its raw data (a hand-edited number, a
partial rewrite, a writer bug) is refused here, once, for every reader, with the field
named: ``check_envelope`` (``report.model``) calls :func:`disagreement` after the types
have been validated (``report.kinds``). Raw rows are also unique by their identity (a
micro repeat by its index, a request by rate, arm, repeat and id): a duplicated row would
count twice.

This module holds the shared helpers and the micro checks; ``agree_rows`` the row-based
kinds and the entry point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from kimi_bench.infra.stats import Measurement, percentile
from kimi_bench.infra.stats.launches import speedup_interval
from kimi_bench.report.roles import baseline_arm, change_arm

REL_TOL = 1e-6  # derived from the same floats: only rounding may differ
EDITED = "the summary disagrees with its raw data (an edited or inconsistent report)"
DERIVED = "a derived block disagrees with the raw data (an edited or inconsistent report)"

Dict = dict[str, Any]


class Disagreement(ValueError):
    """A derived block that disagrees with the raw data, or raw data that is unusable."""


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-9)


def number(value: Any, where: str, *, minimum: float | None = 0.0) -> float:
    """A finite number (>= ``minimum``), else Disagreement naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Disagreement(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise Disagreement(f"{where} is not finite ({value!r})")
    if minimum is not None and value < minimum:
        raise Disagreement(f"{where} is negative ({value!r}): times, bytes and counts are >= 0")
    return float(value)


def agree(stated: Any, derived: float | None, where: str) -> None:
    """A stated value must equal the value derived from raw data (absent: nothing to check)."""
    if stated is None:
        return
    if derived is None:
        raise Disagreement(f"{where} says {stated!r} but the raw data gives None: {EDITED}")
    s = number(stated, where, minimum=None)
    if not close(s, derived):
        raise Disagreement(f"{where} says {s:.6g} but the raw data gives {derived:.6g}: {EDITED}")


def agree_flag(stated: Any, derived: bool, where: str) -> None:
    if stated is not None and stated is not derived:
        raise Disagreement(f"{where} says {stated!r} but the raw data gives {derived!r}: {EDITED}")


def as_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise Disagreement(f"{where} is missing or not a list: no raw data to check")
    return value


def block(raw: Dict, *keys: str) -> Dict:
    """``raw[k1][k2]...`` when each level is an object, else {}."""
    out: Any = raw
    for k in keys:
        out = out.get(k) if isinstance(out, dict) else None
    return out if isinstance(out, dict) else {}


# Summary numbers a serialized Measurement carries, and how each is derived from samples.
_STATS: dict[str, Callable[[Measurement], float]] = {
    "n": lambda m: float(m.n),
    "median": lambda m: m.median,
    "mean": lambda m: m.mean,
    "p10": lambda m: m.p10,
    "p25": lambda m: m.p25,
    "p75": lambda m: m.p75,
    "p90": lambda m: m.p90,
    "iqr": lambda m: m.iqr,
    "min": lambda m: m.min,
    "max": lambda m: m.max,
}


def same_samples(stated: Any, derived: Sequence[float], where: str, source: str) -> None:
    """A block's samples must be exactly the raw values (in order)."""
    xs = as_list(stated, where)
    if len(xs) != len(derived):
        raise Disagreement(
            f"{where} holds {len(xs)} samples but {source} has {len(derived)}: {DERIVED}"
        )
    for i, (a, b) in enumerate(zip(xs, derived, strict=True)):
        if not close(number(a, f"{where}[{i}]", minimum=None), b):
            raise Disagreement(f"{where}[{i}] is {a:.6g} but {source} gives {b:.6g}: {DERIVED}")


def measurement_agrees(body: Any, samples: Sequence[float], where: str, source: str) -> None:
    """A serialized Measurement (``{samples, median, p90, ...}``) against the raw values:
    its samples (``samples`` or ``samples_ms``) and every summary number it states."""
    if not isinstance(body, dict):
        return
    for key in ("samples", "samples_ms"):
        if key in body:
            same_samples(body[key], samples, f"{where}.{key}", source)
    if not samples:
        return
    m = Measurement(samples)
    for key, derive in _STATS.items():
        if isinstance(body.get(key), (int, float)) and not isinstance(body.get(key), bool):
            agree(body[key], derive(m), f"{where}.{key}")


# ------------------------------------------------------------------------------- micro


def micro_repeats(raw: Dict, arm: str, block_name: str = "repeats") -> list[Dict]:
    """One arm's raw records: numbers, totals that are the sum of their stages, and each
    repeat once (``iteration`` unique; no more records than planned repeats)."""
    reps = as_list(block(raw, block_name).get(arm), f"{block_name}.{arm}")
    seen: dict[Any, int] = {}
    for i, rep in enumerate(reps):
        at = f"{block_name}.{arm}[{i}]"
        if not isinstance(rep, dict):
            raise Disagreement(f"{at} is not an object")
        total = number(rep.get("total_ms"), f"{at}.total_ms")
        stages = rep.get("stage_ms")
        if not isinstance(stages, dict):
            raise Disagreement(f"{at}.stage_ms is missing")
        parts = [number(v, f"{at}.stage_ms.{s}") for s, v in stages.items()]
        if not math.isclose(sum(parts), total, rel_tol=1e-6, abs_tol=1e-6):
            raise Disagreement(
                f"{at}.total_ms {total:.6g} is not the sum of its stages ({sum(parts):.6g})"
            )
        for s, v in (rep.get("stage_bytes") or {}).items():
            number(v, f"{at}.stage_bytes.{s}")
        key = rep.get("iteration")
        if key is not None:
            if key in seen:
                raise Disagreement(
                    f"{at} repeats {block_name}.{arm}[{seen[key]}] (iteration {key!r}): each "
                    "repeat is recorded once; a duplicated record would count twice"
                )
            seen[key] = i
    cfg = block(raw, "config")
    planned = cfg.get("repeats" if block_name == "repeats" else "control_repeats")
    launches = cfg.get("launches", 1)  # each launch runs the repeats (reports before: one)
    if isinstance(planned, int) and isinstance(launches, int) and not isinstance(planned, bool):
        planned *= max(1, launches)
    if isinstance(planned, int) and not isinstance(planned, bool) and len(reps) > planned > 0:
        raise Disagreement(
            f"{block_name}.{arm} holds {len(reps)} records but the run planned {planned}: "
            "a record is duplicated or foreign"
        )
    return reps


def arm_block_agrees(arm_block: Any, reps: list[Dict], where: str, source: str) -> None:
    """``arms.<arm>`` (or ``control.arms.<arm>``): total and per-stage samples and their
    summaries against the repeats' records."""
    if not isinstance(arm_block, dict):
        raise Disagreement(f"{where} is missing")
    totals = [float(r["total_ms"]) for r in reps]
    total = arm_block.get("total_ms")
    if not isinstance(total, dict) or "samples" not in total:
        raise Disagreement(f"{where}.total_ms is missing or not a list: no raw data to check")
    measurement_agrees(total, totals, f"{where}.total_ms", f"{source}[*].total_ms")
    for stage, body in (arm_block.get("stages") or {}).items():
        if not isinstance(body, dict) or not all(stage in r["stage_ms"] for r in reps):
            continue
        values = [float(r["stage_ms"][stage]) for r in reps]
        at, src = f"{where}.stages.{stage}", f"{source}[*].stage_ms.{stage}"
        measurement_agrees(body, values, at, src)
        measurement_agrees(body.get("summary_ms"), values, f"{at}.summary_ms", src)


def _moved(raw: Dict, arm: str) -> float:
    """Bytes the arm's ledger moves (rows that copy; views and maps do not)."""
    arm_block = block(raw, "arms", arm)
    copies = as_list(arm_block.get("copies"), f"arms.{arm}.copies")
    moved = 0.0
    for i, row in enumerate(copies):
        b = number(row.get("bytes"), f"arms.{arm}.copies[{i}].bytes")
        number(row.get("count", 0), f"arms.{arm}.copies[{i}].count")
        if row.get("copies", True):
            moved += b
    agree(arm_block.get("moved_bytes"), moved, f"arms.{arm}.moved_bytes")
    return moved


def _roles(raw: Dict, arms: list[str]) -> tuple[str, str]:
    """(baseline, change) as the report records them (``report.roles``; "" for none)."""
    cfg = block(raw, "config")
    return baseline_arm(cfg, arms) or "", change_arm(cfg, arms) or ""


def interval_agrees(stated: Any, samples: Sequence[float], launches: Sequence[int],
                    where: str) -> None:  # fmt: skip
    """A speedup's stated interval against the one its per-repeat values and their launches
    give (``stats.launches.speedup_interval``: the same function made it)."""
    if not isinstance(stated, dict) or not samples:
        return
    derived, _ = speedup_interval(samples, launches)
    if stated.get("kind") != derived.kind:
        raise Disagreement(
            f"{where}.kind is {stated.get('kind')!r} but the repeats' values over "
            f"{len(set(launches))} launch(es) give {derived.kind!r}: {DERIVED}"
        )
    for key in ("low", "high"):
        value = getattr(derived, key)
        if math.isfinite(value):
            agree(stated.get(key), value, f"{where}.{key}")


def _ratios(raw: Dict, totals: dict[str, list[float]], launches: dict[str, list[int]]) -> None:
    """The speedup blocks: the baseline over the change per repeat (``speedup``), and each
    ``speedups.<x>_vs_<y>`` (y's total over x's, per repeat), with their intervals (from
    the repeats' launches)."""
    s = block(raw, "summary")
    base, change = _roles(raw, list(totals))
    pairs = [("speedup", change, base)]
    for k in block(raw, "speedups"):
        fast, _, slow = k.partition("_vs_")
        pairs.append((f"speedups.{k}", fast, slow))
    for where, fast, slow in pairs:
        if fast not in totals or slow not in totals or len(totals[fast]) != len(totals[slow]):
            continue
        kept = [i for i, a in enumerate(totals[fast]) if a]
        values = [totals[slow][i] / totals[fast][i] for i in kept]
        body = block(raw, *where.split("."))
        measurement_agrees(body, values, where, f"repeats {slow} / {fast}")
        ids = [launches[fast][i] for i in kept]
        interval_agrees(body.get("interval"), values, ids, f"{where}.interval")
        if where == "speedup":
            interval_agrees(s.get("speedup_interval"), values, ids, "summary.speedup_interval")
        if values and where == "speedup":
            agree(s.get("speedup_median"), percentile(values, 50), "summary.speedup_median")
            agree(s.get("speedup_p10"), percentile(values, 10), "summary.speedup_p10")
            agree(s.get("speedup_p90"), percentile(values, 90), "summary.speedup_p90")
        if values:
            key = "speedup_" + where.removeprefix("speedups.").replace("-", "_")
            agree(s.get(key), percentile(values, 50), f"summary.{key}")


def _timeline(raw: Dict) -> None:
    """``timeline.<arm>``: the lanes of the repeat it names, exactly."""
    for arm, tl in block(raw, "timeline").items():
        if not isinstance(tl, dict) or "repeat" not in tl:
            continue
        reps = [r for r in block(raw, "repeats").get(arm) or [] if isinstance(r, dict)]
        rec = next((r for r in reps if r.get("iteration") == tl["repeat"]), None)
        if rec is not None and "timeline" in rec and rec["timeline"] != tl.get("ranks"):
            raise Disagreement(
                f"timeline.{arm} disagrees with repeats.{arm} (iteration {tl['repeat']!r}) "
                f"timeline: {DERIVED}"
            )


def micro_disagreement(raw: Dict) -> None:
    cfg, s = block(raw, "config"), block(raw, "summary")
    arms = [str(a) for a in cfg.get("arms") or [] if str(a) in block(raw, "repeats")]
    totals: dict[str, list[float]] = {}
    launches: dict[str, list[int]] = {}
    exact: list[bool] = []
    for arm in arms:
        reps = micro_repeats(raw, arm)
        arm_block_agrees(block(raw, "arms").get(arm), reps, f"arms.{arm}", f"repeats.{arm}")
        totals[arm] = [float(r["total_ms"]) for r in reps]
        launches[arm] = [int(r.get("launch", 0)) for r in reps]
        if arm != _roles(raw, arms)[0]:
            exact += [r.get("bit_exact") is True for r in reps]
        key = arm.replace("-", "_")
        agree(s.get(f"{key}_median_ms"), percentile(totals[arm], 50) if reps else None,
              f"summary.{key}_median_ms")  # fmt: skip
    if not totals:
        return
    agree(s.get("repeats_completed"), float(min(map(len, totals.values()))),
          "summary.repeats_completed")  # fmt: skip
    if exact:
        agree_flag(s.get("bit_exact_all_repeats"), all(exact), "summary.bit_exact_all_repeats")
    _ratios(raw, totals, launches)
    moved = {arm: _moved(raw, arm) for arm in arms}
    for arm, derived in moved.items():
        key = f"{arm.replace('-', '_')}_moved_bytes"
        agree(s.get(key), derived, f"summary.{key}")
    base, change = _roles(raw, arms)
    if moved.get(change) and base in moved:
        agree(s.get("bytes_ratio"), moved[base] / moved[change], "summary.bytes_ratio")
    _floor(raw, totals)
    _control(raw, totals)
    _timeline(raw)


def _floor(raw: Dict, totals: dict[str, list[float]]) -> None:
    floor = raw.get("floor_ms")
    change = _roles(raw, list(totals))[1]
    if floor is None or not totals.get(change):
        return
    f = number(floor, "floor_ms")
    if f <= 0:
        raise Disagreement(f"floor_ms must be > 0, got {f!r}")
    s = block(raw, "summary")
    agree(s.get("floor_ms"), f, "summary.floor_ms")
    agree(s.get("deferred_over_floor"), percentile(totals[change], 50) / f,
          "summary.deferred_over_floor")  # fmt: skip


def _control(raw: Dict, totals: dict[str, list[float]]) -> None:
    """The control rounds (raw like the repeats) against ``control.arms`` and the summary's
    control medians, payload costs and payload speedups."""
    if not raw.get("control_repeats"):
        return
    s = block(raw, "summary")
    payload: dict[str, float] = {}
    for arm, arm_totals in totals.items():
        if arm not in block(raw, "control_repeats"):
            continue
        reps = micro_repeats(raw, arm, "control_repeats")
        ctl_block = block(raw, "control", "arms").get(arm)
        if ctl_block is not None and reps:
            arm_block_agrees(ctl_block, reps, f"control.arms.{arm}", f"control_repeats.{arm}")
        if not reps or not arm_totals:
            continue
        key = arm.replace("-", "_")
        ctl = percentile([float(r["total_ms"]) for r in reps], 50)
        agree(s.get(f"{key}_control_ms"), ctl, f"summary.{key}_control_ms")
        payload[arm] = percentile(arm_totals, 50) - ctl
        agree(s.get(f"{key}_payload_ms"), payload[arm], f"summary.{key}_payload_ms")
    roles = _roles(raw, list(totals))
    for arm, base in [(a, b) for a in payload for b in roles if b in payload]:
        if arm == base or (arm, base) == roles:
            continue
        key = f"payload_speedup_{arm}_vs_{base}".replace("-", "_")
        both = payload[arm] > 0 and payload[base] > 0
        agree(s.get(key), payload[base] / payload[arm] if both else None, f"summary.{key}")
