"""``calibrate``'s outputs: ``calibration.md`` (in-sample and out-of-sample rates apart, per
metric and per carrier) and ``rules.toml`` (the rules with each metric's in-sample
threshold)."""

from __future__ import annotations

from typing import Any

from kimi_bench.ci.calibrate_result import Calibration, MetricDoc, Scores
from kimi_bench.ci.rules import BaselineRules, GateRules


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def rules_toml(rules: GateRules, cal: Calibration, header: str) -> str:
    """The rules with each metric's in-sample threshold, as a TOML file."""
    lines = [f"# {line}" for line in header.splitlines()] + [""]
    lines.append(f'inconclusive = "{rules.inconclusive}"')
    for table in ("parity", "micro", "serve_ab"):
        part = getattr(rules, table)
        if part is None:
            continue
        body = part.model_dump(exclude_none=True, exclude={"rates"})
        lines += ["", f"[{table}]", *(f"{k} = {_toml_value(v)}" for k, v in body.items())]
        for rate, rr in (getattr(part, "rates", None) or {}).items():
            sub = rr.model_dump(exclude_none=True)
            lines += [
                "",
                f'[{table}."{rate}"]',
                *(f"{k} = {_toml_value(v)}" for k, v in sub.items()),
            ]
    base = rules.baseline or BaselineRules()
    threshold = cal.max_regression() or base.max_regression
    pairs = max((len(m.in_sample.aa) for m in cal.metrics), default=0)
    lines += [
        "",
        "[baseline]",
        f"max_regression = {threshold!r}   # calibrated in sample: {pairs} A/A pairs",
        f"alpha = {base.alpha!r}",
        f"metrics = {_toml_value(list(base.metrics))}",
    ]
    if limits := cal.thresholds():
        lines += ["", "[baseline.thresholds]   # each metric's in-sample max_regression"]
        lines += [f'"{m}" = {v!r}' for m, v in limits.items()]
    return "\n".join(lines) + "\n"


def _n(r: Scores, k: int | None, upper: float | None = None) -> str:
    """``k`` of the pairs (a count of A/A failures, with its 95% upper bound, or of catches)."""
    n = r.pairs or 0
    if not n:
        return "no pairs"
    text = f"{k} of {n} ({(k or 0) / n:.0%})"
    return text if upper is None else text + f", <= {upper:.0%} at 95%"


def _failed(r: Scores) -> str:
    return _n(r, r.aa_failures, r.aa_failure_rate_upper_95)


def _caught(r: Scores) -> str:
    return _n(r, r.detected)


def _pct(v: float | None) -> str:
    return "none up to 100%" if v is None else f"{v:.0%}"


def _machines(cal: Calibration) -> list[str]:
    rows = ["| machine | runs | commits | created | setups |", "|---|---|---|---|---|"]
    for name, m in cal.machines.items():
        rows.append(
            f"| {name} | {m.runs} | {', '.join(m.commits)} | "
            f"{', '.join(m.created[:2])}{' ...' if len(m.created) > 2 else ''} | "
            f"{'; '.join(m.setups)} |"
        )
    return rows


def _in_sample(docs: list[MetricDoc], slow: str) -> list[str]:
    rows = [f"| metric | threshold | A/A failures | {slow} caught |", "|---|---|---|---|"]
    for d in docs:
        r = d.in_sample
        t = "none on the grid" if d.threshold is None else f"{d.threshold:g}"
        failed = _failed(r) if r.aa_failures is not None else f"{r.pairs} pairs"
        caught = _caught(r) if r.detected is not None else "-"
        rows.append(f"| {d.metric} | {t} | {failed} | {caught} |")
    return rows


def _carriers(r: Scores) -> list[tuple[str, Scores]]:
    """All pairs, then each carrier's."""
    return [("all", r), *(r.per_carrier or {}).items()]


def _out_of_sample(docs: list[MetricDoc], slow: str) -> list[str]:
    rows = [
        f"| metric | carrier | threshold | A/A failures | {slow} caught | both targets | "
        "smallest slowdown caught in 95% |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in docs:
        oos = d.out_of_sample
        if d.threshold is None or not oos.pairs:
            rows.append(f"| {d.metric} | all | - | {oos.pairs or 0} pairs | - | - | - |")
            continue
        for carrier, r in _carriers(oos):
            rows.append(
                f"| {d.metric} | {carrier} | {d.threshold:g} | {_failed(r)} | "
                f"{_caught(r)} | {'yes' if r.holds else 'NO'} | "
                f"{_pct(r.smallest_effect)} |"
            )
    return rows


def _allowed(docs: list[MetricDoc], slow: str) -> list[str]:
    rows = [
        f"| metric | carrier | smallest threshold (<= 1 in 20 A/A) | {slow} caught at it | "
        "smallest slowdown caught in 95% at it |",
        "|---|---|---|---|---|",
    ]
    for d in docs:
        for carrier, r in _carriers(d.out_of_sample):
            best, at = r.smallest_holding_threshold, r.at_smallest_holding
            if best is None or at is None:
                rows.append(f"| {d.metric} | {carrier} | none on the grid | - | - |")
                continue
            rows.append(
                f"| {d.metric} | {carrier} | {best:g} | {_caught(at)} | "
                f"{_pct(at.smallest_effect)} |"
            )
    return rows


def _written(docs: list[MetricDoc], slow: str) -> list[str]:
    rows = [
        f"| metric | carrier | threshold | out-of-sample A/A failures | out-of-sample {slow} "
        "caught | both targets | smallest slowdown caught in 95% |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in docs:
        w = d.as_written
        for carrier, limit in w.thresholds.items():
            oos = (w.out_of_sample.per_carrier or {}).get(carrier, Scores())
            if not oos.pairs:
                continue
            rows.append(
                f"| {d.metric} | {carrier} | {limit:g} | {_failed(oos)} | "
                f"{_caught(oos)} | {'yes' if oos.holds else 'NO'} | "
                f"{_pct(oos.smallest_effect)} |"
            )
    return rows


def verdict(cal: Calibration) -> str:
    """One paragraph: which metrics hold both targets out of sample, and what can be
    detected where they do not."""
    docs = cal.metric_docs()
    good = [d.metric for d in docs if d.out_of_sample.holds]
    tested = [d for d in docs if d.out_of_sample.pairs]
    if not tested:
        return (
            "No out-of-sample pairs (give --holdout runs of the same setups from other "
            "machines): every rate above is in sample, measured on the machine that chose "
            "the thresholds."
        )
    if good:
        return f"Out of sample, both targets hold for: {', '.join(good)}."
    effects = [f"{d.metric}: {_pct(d.out_of_sample.smallest_effect)}" for d in tested]
    return (
        "Out of sample, no metric holds both targets at its in-sample threshold; the smallest "
        "slowdown each catches in 95% of the cross-machine pairs: " + "; ".join(effects) + "."
    )


def calibration_markdown(cal: Calibration) -> str:
    st = cal.settings
    slow = f"{st.slowdown:.0%} slower"
    docs = cal.metric_docs()
    gate = cal.gate()
    abs_rows = ["| rule | runs | failed | inconclusive |", "|---|---|---|---|"]
    for rule, c in cal.absolute.items():
        abs_rows.append(f"| {rule} | {c.runs} | {c.fail} | {c.inconclusive} |")
    gi, go = gate.in_sample, gate.out_of_sample
    wi, wo = gate.as_written["in_sample"], gate.as_written["out_of_sample"]
    return "\n".join([
        "# kimi-bench gate calibration", "",
        f"Injected slowdown of the deferred arm: +{st.slowdown:.0%}; in-sample target "
        f"false-failure rate {st.target:.0%}; out-of-sample targets: A/A failures <= "
        f"{st.oos_target:.0%}, detection >= {st.power:.0%}; alpha {st.alpha}.", "",
        "## Machines", "", *_machines(cal), "",
        f"## In sample: thresholds chosen on the A/A pairs of the machine `{'calibration'}`",
        "", *_in_sample(docs, slow), "",
        "## Out of sample: the in-sample thresholds, unchanged, on pairs of two machines", "",
        "Each pair is a baseline from one machine and a candidate from another (both "
        "directions).", "", *_out_of_sample(docs, slow), "",
        "## What the cross-machine pairs allow (chosen on them: not an independent estimate)",
        "", *_allowed(docs, slow), "",
        "## The rules file's own thresholds, out of sample", "",
        "The thresholds `--rules` states (per carrier where it names one), on the same "
        "cross-machine pairs.", "", *_written(docs, slow), "",
        "## The whole gate (a pair fails when any metric fails it)", "",
        "At the in-sample thresholds:", "",
        f"In sample: fails {gi.aa_failures} of {gi.pairs} A/A pairs, catches the "
        f"{slow} arm in {gi.injected_detected} of {gi.pairs}. Out of sample: fails "
        f"{go.aa_failures} of {go.pairs} A/A pairs, catches it in "
        f"{go.injected_detected} of {go.pairs}.", "",
        f"At the rules file's own thresholds: in sample fails {wi.aa_failures} of "
        f"{wi.pairs}, catches {wi.injected_detected} of {wi.pairs}; out of sample "
        f"fails {wo.aa_failures} of {wo.pairs}, catches {wo.injected_detected} of "
        f"{wo.pairs}.", "",
        verdict(cal), "",
        "## Absolute rules on the calibration machine's runs", "", *abs_rows, "",
    ])  # fmt: skip
