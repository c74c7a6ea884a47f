"""CI gating: rules from TOML applied to reports, and relative rules against a baseline.

Absolute rules (per kind):
    [parity]    all_bit_exact = true
    [micro]     min_speedup = 8, max_floor_ratio = 20, min_bytes_ratio = 3, bit_exact = true
    [serve_ab]  max_failed = 0
    [serve_ab.<rate>]  max_median_ttft_delta = -0.5, max_p90_ttft_delta, min_throughput_delta
Relative rules (need --baseline; see ``kimi_bench.baseline``):
    [baseline]  max_regression = 0.10, metrics = ["micro.deferred.total_ms", ...]

Always applied, whatever the rules say: ``<kind>.complete`` fails a report whose run
stopped early or errored (``summary.error`` set, or an INCOMPLETE verdict), and a report
built in memory is checked like one read from a file (field types) before any rule runs.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from kimi_bench.baseline import (
    GATED_KINDS,
    KIND_TABLE,
    BaselineError,
    RuleResult,
    find_baseline,
    mann_whitney_greater,
    metric_problem,
    relative_rules,
)
from kimi_bench.limits import MAX_CONFIG_BYTES, LimitError, describe_os_error, read_text_bounded
from kimi_bench.report.model import Report, ReportError, validate_report
from kimi_bench.stats import fmt_speedup

__all__ = [
    "GATED_KINDS",
    "BaselineError",
    "RuleResult",
    "RulesError",
    "evaluate",
    "find_baseline",
    "load_rules",
    "mann_whitney_greater",
]

RULE_KEYS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "parity": {"all_bit_exact": bool},
    "micro": {
        "min_speedup": (int, float),
        "max_floor_ratio": (int, float),
        "min_bytes_ratio": (int, float),
        "bit_exact": bool,
    },
    "serve_ab": {"max_failed": int},
    "serve_ab.rate": {
        "max_median_ttft_delta": (int, float),
        "max_p90_ttft_delta": (int, float),
        "min_throughput_delta": (int, float),
    },
    "baseline": {"max_regression": (int, float), "alpha": (int, float), "metrics": list},
}


class RulesError(ValueError):
    """A rules file that cannot be used."""


def _typecheck(where: str, value: Any, want: type | tuple[type, ...]) -> None:
    if isinstance(value, bool) and want is not bool:
        raise RulesError(f"{where} must be a number, got {value!r}")
    if not isinstance(value, want):
        raise RulesError(f"{where} has the wrong type: {value!r}")


def load_rules(path: str | Path) -> dict[str, Any]:
    """Read and check a rules file: known tables, rules and metric names, typed values."""
    p = Path(path)
    try:
        raw = tomllib.loads(read_text_bounded(p, MAX_CONFIG_BYTES, "rules file"))
    except FileNotFoundError:
        raise RulesError(f"rules file not found: {p}") from None
    except LimitError as exc:
        raise RulesError(str(exc)) from None
    except OSError as exc:
        raise RulesError(f"cannot read rules file {p}: {describe_os_error(exc)}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{p}: not valid TOML: {exc}") from None
    _check_tables(p, raw)
    for metric in raw.get("baseline", {}).get("metrics", []):
        problem = metric_problem(metric)
        if problem:
            raise RulesError(f"{p}: baseline.metrics: {problem}")
    return raw


def _check_tables(p: Path, raw: dict[str, Any]) -> None:
    for table, body in raw.items():
        if table not in ("parity", "micro", "serve_ab", "baseline"):
            raise RulesError(f"{p}: unknown table [{table}]")
        for key, value in body.items():
            if table == "serve_ab" and isinstance(value, dict):
                for k, v in value.items():
                    if k not in RULE_KEYS["serve_ab.rate"]:
                        raise RulesError(
                            f"{p}: unknown rule serve_ab.{key}.{k}; valid: "
                            f"{', '.join(RULE_KEYS['serve_ab.rate'])}"
                        )
                    _typecheck(f"{p}: serve_ab.{key}.{k}", v, RULE_KEYS["serve_ab.rate"][k])
                continue
            if key not in RULE_KEYS[table]:
                raise RulesError(
                    f"{p}: unknown rule {table}.{key}; valid: {', '.join(RULE_KEYS[table])}"
                )
            _typecheck(f"{p}: {table}.{key}", value, RULE_KEYS[table][key])


def _check(rule: str, measured: Any, limit: Any, ok: bool, why: str) -> RuleResult:
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        return RuleResult(rule, measured, limit, "fail", f"not measured: {why}")
    return RuleResult(rule, measured, limit, "pass" if ok else "fail", why)


def parity_rules(report: Report, rules: dict[str, Any]) -> list[RuleResult]:
    out = []
    if rules.get("all_bit_exact"):
        bad = [
            r["name"]
            for r in report.results
            if r.get("error") is None and not (r.get("bit_exact_fp32") and r.get("bit_exact_bf16"))
        ]
        accepted = sum(1 for r in report.results if r.get("error") is None)
        why = (
            f"{accepted} accepted inputs identical in FP32 and BF16"
            if not bad
            else f"not bit-identical: {', '.join(bad)}"
        )
        out.append(
            _check(
                "parity.all_bit_exact", accepted - len(bad), accepted, not bad and accepted > 0, why
            )
        )
    return out


def floor_reason(v: float | None, lim: float) -> str:
    """How far the deferred median is above the floor; a median below the floor is a
    measurement problem (the floor is the least work any arm does), said so."""
    if not v:
        return "no floor"
    if v < 1:
        return (
            f"deferred measured BELOW the floor ({v:.2f}x): a measurement problem, not a "
            "result (see the report's floor notes)"
        )
    return f"deferred takes {v:.1f}x the floor, allowed <= {lim}x"


def micro_rules(report: Report, rules: dict[str, Any]) -> list[RuleResult]:
    s, out = report.summary, []
    if "min_speedup" in rules:
        v, lim = s.get("speedup_median"), rules["min_speedup"]
        out.append(
            _check(
                "micro.min_speedup",
                v,
                lim,
                v is not None and v >= lim,
                f"deferred {fmt_speedup(v, 'eager')} (median), needs >= {lim}x faster"
                if v
                else "no speedup",
            )
        )
    if "max_floor_ratio" in rules:
        v, lim = s.get("deferred_over_floor"), rules["max_floor_ratio"]
        out.append(
            _check(
                "micro.max_floor_ratio",
                v,
                lim,
                v is not None and v <= lim,
                floor_reason(v, lim),
            )
        )
    if "min_bytes_ratio" in rules:
        v, lim = s.get("bytes_ratio"), rules["min_bytes_ratio"]
        out.append(
            _check(
                "micro.min_bytes_ratio",
                v,
                lim,
                v is not None and v >= lim,
                f"eager moves {v:.2f}x the deferred bytes vs >= {lim}x" if v else "no bytes",
            )
        )
    if rules.get("bit_exact"):
        v = s.get("bit_exact_all_repeats")
        out.append(
            _check(
                "micro.bit_exact",
                v,
                True,
                v is True,
                "owner BF16 identical in every repeat" if v else "outputs differ",
            )
        )
    return out


def serve_rules(report: Report, rules: dict[str, Any]) -> list[RuleResult]:
    out = []
    if "max_failed" in rules:
        v = report.summary.get("failed_requests")
        out.append(
            _check(
                "serve_ab.max_failed",
                v,
                rules["max_failed"],
                v is not None and v <= rules["max_failed"],
                f"{v} failed requests",
            )
        )
    ab = report.data.get("ab", {})
    for rate, body in rules.items():
        if not isinstance(body, dict):
            continue
        got = ab.get(rate)
        for key, lim in body.items():
            name = f"serve_ab.{rate}.{key}"
            if not got:
                out.append(RuleResult(name, None, lim, "fail", f"rate {rate} not in the report"))
                continue
            metric = {
                "max_median_ttft_delta": "median_ttft",
                "max_p90_ttft_delta": "p90_ttft",
                "min_throughput_delta": "throughput",
            }[key]
            v = ab_delta(got, metric)
            cmp = "<=" if key.startswith("max") else ">="
            if v is None:
                out.append(_check(name, None, lim, False, f"no {metric} delta at rate {rate}"))
                continue
            ok = v <= lim if key.startswith("max") else v >= lim
            out.append(_check(name, v, lim, ok, f"{metric} delta {v:+.1%} vs {cmp} {lim:+.0%}"))
    return out


def ab_delta(by_rate: dict[str, Any], metric: str, arm: str = "deferred") -> float | None:
    """Relative change of ``metric`` (median_ttft, p90_ttft, throughput) of ``arm`` vs
    eager at one rate, as a fraction: ``ab[rate][arm][metric].delta_pct / 100`` (reports
    with Measurement comparisons), or ``ab[rate][metric].delta`` (earlier reports)."""
    per_arm = by_rate.get(arm)
    if isinstance(per_arm, dict) and isinstance(per_arm.get(metric), dict):
        pct = per_arm[metric].get("delta_pct")
        return None if pct is None else pct / 100.0
    old = by_rate.get(metric)
    return old.get("delta") if isinstance(old, dict) else None


def report_label(rep: Report) -> str:
    """Short identity of a report for tables and JUnit class names, in words:
    ``micro (2 ranks, shm)``, ``parity (kimi-k3, built-in corpus)``."""
    cfg = rep.config if isinstance(rep.config, dict) else {}
    if rep.kind in ("micro", "serve-ab"):
        return f"{rep.kind} ({cfg.get('ranks')} ranks, {cfg.get('transport')})"
    if rep.kind == "parity":
        pre = cfg.get("preprocess")
        parts = [str(pre.get("name") if isinstance(pre, dict) else cfg.get("preset") or "?")]
        parts.append(f"images in {cfg['images']}" if cfg.get("images") else "built-in corpus")
        if cfg.get("policy"):
            parts.append(f"per-{cfg['policy']} decisions")
        return f"parity ({', '.join(parts)})"
    return f"{rep.kind} ({rep.source or 'in memory'})"


def completeness_rule(report: Report) -> RuleResult:
    """``<kind>.complete``: fails when the run stopped early or errored, naming why."""
    s = report.summary
    error, verdict = s.get("error"), str(s.get("verdict") or "")
    name = f"{KIND_TABLE.get(report.kind, report.kind)}.complete"
    if error or verdict.upper().startswith("INCOMPLETE"):
        why = f"the run did not complete: {error or verdict}"
        return RuleResult(name, False, True, "fail", why)
    return RuleResult(name, True, True, "pass", "the run completed")


def _rules_for(
    rep: Report, rules: dict[str, Any], baseline: Path | None, required: bool
) -> list[RuleResult]:
    try:
        validate_report(rep)
    except ReportError as exc:
        return [RuleResult("report.valid", False, True, "fail", str(exc))]
    if rep.kind not in GATED_KINDS:
        why = f"kind {rep.kind!r} is not gated; expected one of {', '.join(GATED_KINDS)}"
        return [RuleResult("report.kind", rep.kind, list(GATED_KINDS), "fail", why)]
    out = [completeness_rule(rep)]
    table = rules.get(KIND_TABLE[rep.kind], {})
    if rep.kind == "parity":
        out += parity_rules(rep, table)
    elif rep.kind == "micro":
        out += micro_rules(rep, table)
    else:
        out += serve_rules(rep, table)
    if "baseline" in rules:
        base = find_baseline(rep, baseline, required=required)
        out += relative_rules(rep, base, rules["baseline"])
    return out


def evaluate(
    reports: list[Report],
    rules: dict[str, Any],
    baseline: Path | None,
    *,
    baseline_required: bool = True,
) -> list[RuleResult]:
    """Every rule on every report. ``baseline_required``: ``baseline`` was asked for, so
    a missing or unreadable one raises BaselineError instead of skipping."""
    results: list[RuleResult] = []
    for rep in reports:
        for r in _rules_for(rep, rules, baseline, baseline_required):
            r.report = report_label(rep)
            results.append(r)
    return results


def default_baseline_dir(report: Report, root: Path = Path("reports/baselines")) -> Path:
    name = str(report.environment.get("device_name", "")).lower()
    return root / ("h200" if "h200" in name else "cpu")
