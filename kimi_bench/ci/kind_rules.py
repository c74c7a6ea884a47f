"""The absolute rules of each gated kind, applied to a report's evidence
(``ci.evidence``): ``[parity]``, ``[micro]`` and ``[serve_ab]`` / ``[serve_ab.<rate>]``
(the module ``ci.gate`` lists them with their defaults)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kimi_bench.ci.comparable import UNRECORDED
from kimi_bench.ci.evidence import Evidence, ServeFigures
from kimi_bench.ci.rules import MicroRules, ParityRules, ServeRules
from kimi_bench.ci.serving_rules import ABSOLUTE, serving_rules
from kimi_bench.ci.verdicts import (
    FAIL,
    PASS,
    SKIP,
    RuleResult,
    decide,
    interval_text,
    with_policy,
)
from kimi_bench.infra.stats.compare import Comparison
from kimi_bench.infra.stats.format import fmt_speedup
from kimi_bench.results.micro_figures import all_figures


def _rule(name: str, ok: bool, measured: Any, limit: Any, why: str) -> RuleResult:
    return RuleResult(name, measured, limit, PASS if ok else FAIL, why)


def parity_rules(ev: Evidence, rules: ParityRules | None) -> list[RuleResult]:
    """``all_bit_exact``: every input identical in FP32 and BF16. An input that was rejected
    (unreadable, refused by a limit) was never compared: it counts against the rule unless
    ``max_rejected`` allows that many."""
    if rules is None or not rules.all_bit_exact:
        return []
    d = ev.derived.parity
    bad, accepted, rejected = sorted(d.exactness_differing), d.accepted, list(d.rejected)
    allowed = rules.max_rejected or 0
    dtypes = "FP32 and BF16" if ev.derived.fp32 else "BF16 (no FP32 features)"
    why = (
        f"{accepted} accepted inputs identical in {dtypes}"
        if not bad
        else f"not bit-identical: {', '.join(bad)}"
    )
    if not accepted:
        why = "no accepted input: nothing was compared"
    ok = d.all_bit_exact and len(rejected) <= allowed
    if rejected:
        shown = ", ".join(rejected[:5]) + (", ..." if len(rejected) > 5 else "")
        why += (
            f"; {len(rejected)} of {accepted + len(rejected)} inputs rejected, never compared "
            f"({shown}); [parity] max_rejected allows {allowed}"
        )
    return [_rule("parity.all_bit_exact", ok, accepted - len(bad), accepted + len(rejected), why)]


def _min_speedup(ev: Evidence, lim: float, policy: str) -> RuleResult:
    head = ev.micro.headline
    if head is None or not head.ratio.n:
        return _rule("micro.min_speedup", False, None, lim, "no paired speedup")
    m, iv = head.ratio, head.interval  # the re-run interval
    verdict = decide(m.median, iv.low, iv.high, lim, at_least=True)
    spread = interval_text(iv.low, iv.high)
    why = f"deferred {fmt_speedup(m.median, 'eager')} (median){spread}, needs >= {lim}x"
    return with_policy(RuleResult("micro.min_speedup", m.median, lim, verdict, why), policy)


def _max_floor_ratio(ev: Evidence, lim: float, policy: str) -> RuleResult:
    v = ev.micro.over_floor
    ok = v is not None and 1.0 <= v <= lim  # below the floor: a measurement problem
    return _rule("micro.max_floor_ratio", ok, v, lim, floor_reason(v, lim))


def _min_bytes_ratio(ev: Evidence, lim: float, policy: str) -> RuleResult:
    v = ev.micro.bytes_ratio
    why = f"eager moves {v:.2f}x the deferred bytes vs >= {lim}x" if v else "no bytes"
    return _rule("micro.min_bytes_ratio", v is not None and v >= lim, v, lim, why)


def _bit_exact(ev: Evidence, lim: bool, policy: str) -> RuleResult:
    d = ev.micro
    exact = d.bit_exact_all_repeats is True
    why = (
        f"owner BF16 identical in all {d.repeats_completed} repeats" if exact else "outputs differ"
    )
    return _rule("micro.bit_exact", exact, exact, True, why)


def _figure_limits(ev: Evidence, rules: MicroRules) -> list[RuleResult]:
    """``[micro.min]`` / ``[micro.max]``: a figure by its name (``results.micro_figures.
    FIGURES``), at least / at most its limit; a figure the run did not give fails."""
    figures, out = all_figures(ev.micro), []
    for bound, limits in (("min", rules.min), ("max", rules.max)):
        for name, lim in (limits or {}).items():
            v = figures.get(name)
            ok = isinstance(v, int | float) and (v >= lim if bound == "min" else v <= lim)
            op = ">=" if bound == "min" else "<="
            why = f"{name} {v:.6g}, needs {op} {lim:g}" if v is not None else f"no {name}"
            out.append(_rule(f"micro.{bound}.{name}", ok, v, lim, why))
    return out


# The micro rules in the order they are reported: the MicroRules field each one reads and
# its check; a field left unset (None, or bit_exact = false) is not checked.
_MICRO_CHECKS: tuple[tuple[str, Callable[[Evidence, Any, str], RuleResult]], ...] = (
    ("min_speedup", _min_speedup),
    ("max_floor_ratio", _max_floor_ratio),
    ("min_bytes_ratio", _min_bytes_ratio),
    ("bit_exact", _bit_exact),
)


def micro_rules(ev: Evidence, rules: MicroRules | None, policy: str) -> list[RuleResult]:
    if rules is None:
        return []
    limits = [(getattr(rules, field), check) for field, check in _MICRO_CHECKS]
    out = [check(ev, lim, policy) for lim, check in limits if lim is not None and lim is not False]
    return out + _figure_limits(ev, rules)


def floor_reason(v: float | None, lim: float) -> str:
    """How far the deferred median is above the floor; a median below the floor is a
    measurement problem (the floor is the least work any arm does), said so."""
    if not v:
        return "no floor measured"
    if v < 1:
        return (
            f"deferred measured BELOW the floor ({v:.2f}x): a measurement problem, not a "
            "result (see the report's floor notes)"
        )
    return f"deferred takes {v:.1f}x the floor, allowed <= {lim}x"


_SERVE_METRIC = {
    "max_median_ttft_delta": "median_ttft",
    "max_p90_ttft_delta": "p90_ttft",
    "min_throughput_delta": "throughput",
    "min_goodput_delta": "goodput",
}


def _delta_rule(name: str, c: Comparison | None, key: str, lim: float, policy: str) -> RuleResult:
    metric = _SERVE_METRIC[key]
    if c is None or c.delta_pct is None:
        return RuleResult(name, None, lim, FAIL, f"no {metric} delta (no served requests)")
    v = c.delta_pct / 100.0
    low = None if c.interval.low is None else c.interval.low / 100.0
    high = None if c.interval.high is None else c.interval.high / 100.0
    at_least = key.startswith("min")
    verdict = decide(v, low, high, lim, at_least=at_least)
    iv = interval_text(low, high, "{:+.1%}")
    why = f"{metric} delta {v:+.1%}{iv} vs {'>=' if at_least else '<='} {lim:+.0%}"
    return with_policy(RuleResult(name, v, lim, verdict, why), policy)


def serve_rules(ev: Evidence, rules: ServeRules | None, policy: str) -> list[RuleResult]:
    if rules is None:
        return []
    f = _serve(ev)
    out = [] if rules.max_failed is None else [_max_failed(f, rules.max_failed)]
    for rate, body in rules.rates.items():
        limits = body.model_dump(exclude_none=True)
        if f.rates and rate not in f.rates:
            out += _not_run(rate, limits, f.rates)
            continue
        per_arm = f.ab.get(rate) or {}
        arm = f.change_arm if f.change_arm in per_arm else next(iter(per_arm), None)
        out += serving_rules(ev, rate, f.arms, body)
        for key, lim in limits.items():
            if key in ABSOLUTE:
                continue
            name = f"serve_ab.{rate}.{key}"
            if arm is None:
                why = (
                    f"rate {rate} has one arm ({', '.join(f.arms)}): no A/B delta to check "
                    "(import or run a second arm)"
                    if len(f.arms) == 1
                    else f"rate {rate} not in the report"
                )
                out.append(RuleResult(name, None, lim, FAIL, why))
                continue
            out.append(_delta_rule(name, per_arm[arm].get(_SERVE_METRIC[key]), key, lim, policy))
    return out


def _serve(ev: Evidence) -> ServeFigures:
    assert ev.serve is not None, "serve-ab rules read a serve-ab report's evidence"
    return ev.serve


def _not_run(rate: str, limits: dict[str, float], planned: list[str]) -> list[RuleResult]:
    """A rule for a rate this run did not plan (skipped), or may have run without recording
    its load (an imported file: failed, as it cannot be shown either way)."""
    if UNRECORDED in planned:
        why = (
            "the report does not record its load (an imported file without its rate or "
            f"concurrency limit): it cannot be shown to have run rate {rate}, nor not"
        )
        verdict = FAIL
    else:
        why, verdict = f"rate {rate} was not run (this run's rates: {', '.join(planned)})", SKIP
    return [
        RuleResult(f"serve_ab.{rate}.{key}", None, lim, verdict, why) for key, lim in limits.items()
    ]


def _max_failed(f: ServeFigures, lim: int) -> RuleResult:
    """Failed requests counted from the request rows. A summary-only report (a peer's file
    without per-request data) has no rows to count them from, and a file that does not say
    how many failed cannot be counted at all: both fail by name rather than pass."""
    v = f.failed
    if f.summary_only:
        why = (
            "summary only: no request rows to count failures from (the tool's own count "
            f"says {v}); import a file with per-request data"
        )
        return RuleResult("serve_ab.max_failed", None, lim, FAIL, why)
    if f.failed_unknown:
        why = "the file does not count failed requests: they cannot be shown to be <= " + str(lim)
        return RuleResult("serve_ab.max_failed", None, lim, FAIL, why)
    return _rule("serve_ab.max_failed", v <= lim, v, lim, f"{v} failed requests")
