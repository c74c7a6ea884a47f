"""CI gating: rules from TOML applied to reports, and relative rules against a baseline.

Absolute rules (per kind):
    [parity]    all_bit_exact = true
    [micro]     min_speedup = 8, max_floor_ratio = 20, min_bytes_ratio = 3, bit_exact = true
    [serve_ab]  max_failed = 0
    [serve_ab.<rate>]  max_median_ttft_delta = -0.5, max_p90_ttft_delta, min_throughput_delta
Relative rules (need --baseline):
    [baseline]  max_regression = 0.10, metrics = ["micro.deferred.total_ms", ...]

A relative rule fails only when the new median is worse than the baseline's by more than
``max_regression`` AND a one-sided Mann-Whitney U test on the raw samples says the shift
is beyond noise (p < ``alpha``; ``kimi_bench.stats.mann_whitney``: exact without ties
for small samples, else the normal approximation with tie correction).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_bench.report.model import Report, ReportError, load_report
from kimi_bench.stats import mann_whitney, median

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
KIND_TABLE = {"parity": "parity", "micro": "micro", "serve-ab": "serve_ab"}


class RulesError(ValueError):
    """A rules file that cannot be used."""


@dataclass
class RuleResult:
    rule: str
    measured: Any
    limit: Any
    verdict: str  # "pass", "fail" or "skip"
    reason: str
    report: str = ""  # which report the rule was applied to

    def as_dict(self) -> dict[str, Any]:
        return {
            "report": self.report,
            "rule": self.rule,
            "measured": self.measured,
            "limit": self.limit,
            "verdict": self.verdict,
            "reason": self.reason,
        }


def _typecheck(where: str, value: Any, want: type | tuple[type, ...]) -> None:
    if isinstance(value, bool) and want is not bool:
        raise RulesError(f"{where} must be a number, got {value!r}")
    if not isinstance(value, want):
        raise RulesError(f"{where} has the wrong type: {value!r}")


def load_rules(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise RulesError(f"rules file not found: {p}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{p}: not valid TOML: {exc}") from None
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
    return raw


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
            if r.get("error") is None and not (r["bit_exact_fp32"] and r["bit_exact_bf16"])
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
                f"median eager/deferred = {v:.2f}x vs >= {lim}x" if v else "no speedup",
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
                f"deferred is {v:.1f}x the floor vs <= {lim}x" if v else "no floor",
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
            v = got[metric]["delta"]
            ok = v <= lim if key.startswith("max") else v >= lim
            cmp = "<=" if key.startswith("max") else ">="
            out.append(_check(name, v, lim, ok, f"{metric} delta {v:+.1%} vs {cmp} {lim:+.0%}"))
    return out


def metric_samples(report: Report, metric: str) -> tuple[list[float], bool]:
    """Raw samples for a named metric and whether higher is better.

    micro.<arm>.total_ms | micro.<arm>.<stage>_ms | micro.speedup |
    serve_ab.<rate>.<arm>.ttft_ms"""
    parts = metric.split(".")
    if parts[0] == "micro" and report.kind == "micro":
        if parts[1:] == ["speedup"]:
            return list(report.data["speedup"]["samples"]), True
        if len(parts) == 3:
            arm = report.data["arms"].get(parts[1])
            if arm is not None and parts[2] == "total_ms":
                return list(arm["total_ms"]["samples"]), False
            stage = parts[2].removesuffix("_ms")
            if arm is not None and stage in arm["stages"]:
                return list(arm["stages"][stage]["samples_ms"]), False
    if parts[0] == "serve_ab" and report.kind == "serve-ab" and len(parts) == 4:
        rate, arm = parts[1], parts[2]
        xs = [
            r["ttft_ms"]
            for r in report.data["requests"]
            if r["rate"] == rate and r["arm"] == arm and r.get("ttft_ms") is not None
        ]
        return xs, False
    raise KeyError(metric)


def mann_whitney_greater(new: list[float], base: list[float]) -> float:
    """One-sided p-value that ``new`` tends to be larger than ``base`` (kept for callers
    until the gate uses ``kimi_bench.stats.mann_whitney`` directly)."""
    return mann_whitney(new, base, alternative="greater").p_value


def relative_rules(new: Report, base: Report | None, rules: dict[str, Any]) -> list[RuleResult]:
    threshold = float(rules.get("max_regression", 0.10))
    alpha = float(rules.get("alpha", 0.05))
    out = []
    prefix = KIND_TABLE[new.kind]
    for metric in rules.get("metrics", []):
        if not str(metric).startswith(prefix + "."):
            continue
        name = f"baseline.{metric}"
        if base is None:
            out.append(RuleResult(name, None, threshold, "skip", "no matching baseline report"))
            continue
        try:
            xs, higher_better = metric_samples(new, metric)
            bs, _ = metric_samples(base, metric)
        except KeyError:
            out.append(RuleResult(name, None, threshold, "fail", f"unknown metric {metric}"))
            continue
        if not xs or not bs:
            out.append(RuleResult(name, None, threshold, "fail", "no samples"))
            continue
        m_new, m_base = median(xs), median(bs)
        change = (m_new - m_base) / m_base if m_base else math.nan
        worse = -change if higher_better else change
        p = mann_whitney_greater(bs, xs) if higher_better else mann_whitney_greater(xs, bs)
        fail = worse > threshold and p < alpha
        why = (
            f"median {m_base:.4g} -> {m_new:.4g} ({change:+.1%}); "
            f"Mann-Whitney one-sided p = {p:.3g}; fails if worse by > {threshold:.0%} "
            f"and p < {alpha}"
        )
        out.append(RuleResult(name, change, threshold, "fail" if fail else "pass", why))
    return out


def same_setup(a: Report, b: Report) -> bool:
    keys = {
        "micro": ("groups", "ranks", "transport"),
        "serve-ab": ("rates", "ranks", "resolution", "transport"),
        "parity": (),
    }[a.kind]
    return a.kind == b.kind and all(a.config.get(k) == b.config.get(k) for k in keys)


def find_baseline(report: Report, where: Path | None) -> Report | None:
    """The baseline report of the same kind and setup: a file, or searched in a folder."""
    if where is None or not where.exists():
        return None
    candidates = [where] if where.is_file() else sorted(where.rglob("report.json"))
    for c in candidates:
        try:
            base = load_report(c)
        except ReportError:
            continue
        if same_setup(report, base):
            return base
    return None


def report_label(rep: Report) -> str:
    """Short identity of a report for tables and JUnit class names."""
    cfg = rep.config
    if rep.kind == "micro":
        return f"micro[{cfg.get('ranks')} ranks, {cfg.get('transport')}]"
    if rep.kind == "serve-ab":
        return f"serve-ab[{cfg.get('ranks')} ranks, {cfg.get('transport')}]"
    return f"parity[{cfg.get('preprocess', {}).get('name')}, {cfg.get('policy')}]"


def evaluate(
    reports: list[Report], rules: dict[str, Any], baseline: Path | None
) -> list[RuleResult]:
    results: list[RuleResult] = []
    for rep in reports:
        start = len(results)
        table = rules.get(KIND_TABLE.get(rep.kind, ""), {})
        if rep.kind == "parity":
            results += parity_rules(rep, table)
        elif rep.kind == "micro":
            results += micro_rules(rep, table)
        elif rep.kind == "serve-ab":
            results += serve_rules(rep, table)
        if "baseline" in rules and rep.kind in KIND_TABLE:
            results += relative_rules(rep, find_baseline(rep, baseline), rules["baseline"])
        for r in results[start:]:
            r.report = report_label(rep)
    return results


def default_baseline_dir(report: Report, root: Path = Path("reports/baselines")) -> Path:
    name = str(report.environment.get("device_name", "")).lower()
    return root / ("h200" if "h200" in name else "cpu")
