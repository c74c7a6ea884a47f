"""``kimi-bench calibrate``: measure the gate's false-failure rate and detection power on
this machine, and write rules whose baseline threshold holds the target."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import say, usage_error
from kimi_bench.cli.output import default_out
from kimi_bench.options import CalibrateOptions


def _run_folders(folders: list[Path]) -> list[list[Any]]:
    """The gated reports of each earlier run folder, in the order given."""
    from kimi_bench.ci.metrics import GATED_KINDS
    from kimi_bench.report.model import find_report_files, load_report

    return [[load_report(f, kinds=GATED_KINDS) for f in find_report_files(d)] for d in folders]


def _run_scenario_times(scenario: str, n: int, out: Path, device: str | None) -> list[list[Any]]:
    from kimi_bench.bench.runner import run_scenario
    from kimi_bench.bench.scenario import load_scenario, with_overrides

    sc = with_overrides(load_scenario(scenario), {"device": device} if device else {})
    reports: list[list[Any]] = []
    t0 = time.monotonic()
    for i in range(n):
        folder = out / "runs" / f"run-{i:02d}"
        _, reps = run_scenario(sc, folder)
        reports.append(reps)
        done = time.monotonic() - t0
        eta = done / (i + 1) * (n - i - 1)
        say(f"calibrate: run {i + 1} of {n} done ({done:.0f} s, eta {eta:.0f} s)", err=True)
    return reports


CALIBRATE_DOC = """Calibrate the gate on this machine: run the scenario 2 x --pairs times at this
commit (A/A: nothing changed), measure how often each rule fails an unchanged run, and
how often the baseline rules catch an injected --slowdown of the deferred arm (its raw
samples scaled; documented in the report). Writes calibration.json, calibration.md and
rules.toml (the rules with the calibrated [baseline] max_regression).

Exit codes: 0 written, 2 unusable input.

Example: kimi-bench calibrate --pairs 20 --output-dir cal
"""


def _calibrate(opts: CalibrateOptions, _: dict[str, Any]) -> None:
    from kimi_bench.bench.scenario import ScenarioError, resolve_path
    from kimi_bench.ci.calibrate import calibrate as run_calibration
    from kimi_bench.ci.calibrate import calibration_markdown, rules_toml
    from kimi_bench.ci.rules import RulesError, load_rules
    from kimi_bench.report.model import ReportError
    from kimi_bench.report.writers import atomic_write_text

    scenario, pairs, slowdown, target = opts.scenario, opts.pairs, opts.slowdown, opts.target
    rules, runs, device = opts.rules, list(opts.runs), opts.device
    folder = opts.out or default_out("calibrate")
    try:
        rule_set = load_rules(resolve_path(rules))
        reports = (
            _run_folders(runs) if runs else _run_scenario_times(scenario, 2 * pairs, folder, device)
        )
    except (RulesError, ReportError, ScenarioError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    cal = run_calibration(reports, rule_set, slowdown=slowdown, target=target)
    folder.mkdir(parents=True, exist_ok=True)
    doc = cal.as_dict() | {"scenario": scenario, "rules": rules}
    if reports and reports[0]:
        doc["environment"] = reports[0][0].environment
    atomic_write_text(folder / "calibration.json", json.dumps(doc, indent=1, default=str))
    atomic_write_text(folder / "calibration.md", calibration_markdown(cal))
    header = (
        f"kimi-bench gate rules calibrated by `kimi-bench calibrate --pairs {cal.pairs} "
        f"--slowdown {slowdown}` on scenario {scenario}\n(see calibration.md beside this file)"
    )
    atomic_write_text(folder / "rules.toml", rules_toml(rule_set, cal, header))
    for m in cal.metrics:
        say(
            f"{m.metric}: max_regression {m.max_regression}, A/A failures "
            f"{m.false_failures} of {len(m.aa)}, injected slowdown caught in {m.detected} "
            f"of {len(m.injected)}"
        )
    say(f"calibration: {folder / 'calibration.md'}; rules: {folder / 'rules.toml'}", err=True)


calibrate = model_command(CalibrateOptions, _calibrate, CALIBRATE_DOC)
