"""``kimi-bench calibrate``: measure the gate's false-failure rate and detection power on
this machine (in sample) and on runs from other machines (out of sample), and write rules
whose baseline thresholds hold the in-sample target."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import typer

from kimi_bench.cli.build import model_command
from kimi_bench.cli.common import say, usage_error
from kimi_bench.cli.output import default_out
from kimi_bench.options import CalibrateOptions


def _reports_in(folder: Path, option: str) -> list[Any]:
    """The gated reports of one folder, each checked as the gate checks it (types, derived
    blocks against raw data: ReportError naming the field)."""
    from kimi_bench.ci.evidence_rows import evidence
    from kimi_bench.ci.metrics import GATED_KINDS
    from kimi_bench.report.files import report_file
    from kimi_bench.report.model import ReportError, find_report_files, load_report

    if not folder.is_dir():
        folder = report_file(folder)  # a packed report.json: its .gz
    if not folder.exists():
        raise ReportError(f"{option} {folder} does not exist")
    files = [folder] if folder.is_file() else find_report_files(folder)
    if not files:
        raise ReportError(f"{option} {folder} holds no report.json: not a run folder")
    reports = [load_report(f, kinds=GATED_KINDS) for f in files]
    for rep in reports:
        evidence(rep)
    return reports


def _check_distinct(given: list[tuple[str, Path]]) -> None:
    """Each run counted once: a report reached twice (the same folder given twice, or a
    folder inside another) and a --holdout run that is one of the --runs (in sample, not
    another machine's) are usage errors naming the options."""
    from kimi_bench.report.model import ReportError, find_report_files

    seen: dict[str, tuple[str, Path]] = {}
    for option, folder in given:
        if not folder.exists():
            continue  # _reports_in names it
        files = [folder] if folder.is_file() else find_report_files(folder)
        for f in files:
            key = os.path.realpath(f)
            if key not in seen:
                seen[key] = (option, folder)
                continue
            first, where = seen[key]
            if {first, option} == {"--runs", "--holdout"}:
                ins, out = (where, folder) if first == "--runs" else (folder, where)
                raise ReportError(
                    f"--holdout {out} holds {f}, which is also an in-sample run (--runs {ins}): "
                    "a holdout must be runs from another machine, never the calibration's own"
                )
            raise ReportError(
                f"{option} {folder}: {f} is already given ({first} {where}): the same folder "
                "given twice would count its runs twice"
            )


def _runs(folders: list[Path], machine: str, option: str) -> list[Any]:
    from kimi_bench.ci.calibrate_pairs import Run

    reports = [rep for folder in folders for rep in _reports_in(folder, option)]
    return [Run(rep, machine, i) for i, rep in enumerate(reports)]


def _run_scenario_times(scenario: str, n: int, out: Path, device: str | None) -> list[Any]:
    from kimi_bench.bench.runner import run_scenario
    from kimi_bench.bench.scenario import load_scenario, with_overrides
    from kimi_bench.ci.calibrate_pairs import CALIBRATION, Run

    sc = with_overrides(load_scenario(scenario), {"device": device} if device else {})
    runs: list[Any] = []
    t0 = time.monotonic()
    for i in range(n):
        _, reps = run_scenario(sc, out / "runs" / f"run-{i:02d}")
        runs += [Run(rep, CALIBRATION, len(runs) + k) for k, rep in enumerate(reps)]
        done = time.monotonic() - t0
        eta = done / (i + 1) * (n - i - 1)
        say(f"calibrate: run {i + 1} of {n} done ({done:.0f} s, eta {eta:.0f} s)", err=True)
    return runs


def _inputs(opts: CalibrateOptions, folder: Path) -> tuple[Any, list[Any], list[Any]]:
    """The rules, the calibration runs and the holdout runs, each input validated: a
    missing or empty folder, a single run, no A/A pair or no out-of-sample pair is a usage
    error naming the option (never a calibration of nothing)."""
    from kimi_bench.bench.scenario import resolve_path
    from kimi_bench.ci.calibrate import metrics_of, pairs_for
    from kimi_bench.ci.calibrate_pairs import CALIBRATION
    from kimi_bench.ci.rules import load_rules
    from kimi_bench.report.model import ReportError

    rules = load_rules(resolve_path(opts.rules))
    metrics = metrics_of(rules)
    if not metrics:
        raise ReportError(f"--rules {opts.rules} gates no baseline metric: nothing to calibrate")
    if opts.runs and len(opts.runs) < 2:
        raise ReportError(
            f"--runs: {len(opts.runs)} run folder given; A/A pairs need at least 2 runs of one "
            "setup on one machine"
        )
    machines: dict[str, list[Path]] = {}
    for given in opts.holdout:  # LABEL=DIR joins folders of one machine under LABEL
        label, sep, rest = str(given).partition("=")
        folder = Path(rest) if sep and label and "/" not in label else given
        machines.setdefault(label if sep and folder != given else folder.name, []).append(folder)
    _check_distinct([("--runs", p) for p in opts.runs]
                    + [("--holdout", p) for ps in machines.values() for p in ps])  # fmt: skip
    holdout = []
    for label, folders in machines.items():
        holdout += _runs(folders, label, "--holdout")
    runs = (
        _runs(list(opts.runs), CALIBRATION, "--runs")
        if opts.runs
        else _run_scenario_times(opts.scenario, 2 * opts.pairs, folder, opts.device)
    )
    ins, oos = pairs_for(runs, holdout)
    if not ins:
        raise ReportError(
            "--runs: no two runs of one setup: no A/A pair to calibrate on (runs of one setup "
            "are paired in the order given)"
        )
    if holdout and not oos:
        raise ReportError(
            "--holdout: no run shares a setup with a run of another machine: no out-of-sample pair"
        )
    return rules, runs, holdout


CALIBRATE_DOC = """Calibrate the gate: choose each baseline metric's threshold on A/A pairs of one
machine (in sample: the scenario run 2 x --pairs times at this commit, or --runs folders of
earlier runs of one machine), then score those thresholds, unchanged, on pairs of runs from
two different machines (out of sample: --holdout, one folder per machine). Both rates are
reported apart, per metric and per carrier: the A/A false-failure rate and how often an
injected --slowdown of the deferred arm (its raw samples scaled, as scripts/slow_report.py
does) is caught; out of sample also the smallest slowdown caught in --power of the pairs.
Every run is checked as the gate checks it. Writes calibration.json, calibration.md and
rules.toml (the rules with the in-sample thresholds).

Exit codes: 0 written, 2 unusable input (a missing or empty folder, a single run, no A/A
pair, no out-of-sample pair for --holdout, a --holdout run that is one of the --runs, the
same folder given twice, a report the gate would refuse, a bad rules file), 3 the
calibration could not be written.

Example: kimi-bench calibrate --runs a1 --runs a2 --runs a3 --runs a4 --holdout other-host
"""


def _calibrate(opts: CalibrateOptions, _: dict[str, Any]) -> None:
    from kimi_bench.bench.scenario import ScenarioError
    from kimi_bench.ci.calibrate_result import Settings, calibrate
    from kimi_bench.ci.calibrate_text import calibration_markdown, rules_toml
    from kimi_bench.ci.rules import RulesError
    from kimi_bench.report.model import ReportError
    from kimi_bench.report.output import EXIT_OUTPUT_INCOMPLETE
    from kimi_bench.report.writers import atomic_write_text

    folder = opts.out or default_out("calibrate")
    st = Settings.from_options(opts)
    try:
        rules, runs, holdout = _inputs(opts, folder)
        cal = calibrate(runs, holdout, rules, st)
        doc = cal.document().model_dump(exclude_unset=True)
        doc |= {"scenario": None if opts.runs else opts.scenario, "rules": opts.rules}
    except (RulesError, ReportError, ScenarioError, ValueError) as exc:
        raise usage_error(str(exc)) from None
    doc["environment"] = runs[0].report.environment
    pairs = max((len(m.in_sample.aa) for m in cal.metrics), default=0)
    header = (
        f"kimi-bench gate rules calibrated by `kimi-bench calibrate` ({pairs} A/A pairs, "
        f"--slowdown {opts.slowdown})\n(see calibration.md beside this file)"
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "calibration.json", json.dumps(doc, indent=1, default=str))
        atomic_write_text(folder / "calibration.md", calibration_markdown(cal))
        atomic_write_text(folder / "rules.toml", rules_toml(rules, cal, header))
    except OSError as exc:
        say(f"error: could not write the calibration to {folder}: {exc}", err=True)
        raise typer.Exit(code=EXIT_OUTPUT_INCOMPLETE) from None
    for m, d in zip(cal.metrics, cal.metric_docs(), strict=True):
        ins, oos = d.in_sample, d.out_of_sample
        failed, caught = ("-" if n is None else n for n in (ins.aa_failures, ins.detected))
        line = (
            f"{m.metric}: threshold {m.threshold}; in sample {failed} of "
            f"{ins.pairs} A/A pairs fail, the slower arm caught in {caught}"
        )
        if oos.pairs:
            line += (
                f"; out of sample {oos.aa_failures} of {oos.pairs} fail, caught in {oos.detected}"
            )
        say(line)
    say(f"calibration: {folder / 'calibration.md'}; rules: {folder / 'rules.toml'}", err=True)


calibrate = model_command(CalibrateOptions, _calibrate, CALIBRATE_DOC)
