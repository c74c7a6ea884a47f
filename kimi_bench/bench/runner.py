"""``kimi-bench run``: the main job on one scenario (``options.RunOptions``): parity, a
small micro, a small serve-ab, then the gate, into one folder with ``index.md`` and a
self-contained ``index.html`` linking the parts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kimi_bench.bench.micro import MicroFailed, run_micro
from kimi_bench.bench.parity import run_parity
from kimi_bench.bench.scenario import ScenarioError, resolve_path
from kimi_bench.bench.serve import ServeFailed, run_serve_ab
from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.ci.gate import Allow, RuleResult, load_rules, run_gate
from kimi_bench.infra.environment import host_load, resolve_device
from kimi_bench.infra.limits import is_interrupt
from kimi_bench.options import RunOptions, resolve_defaults
from kimi_bench.report.emit import emit_micro, emit_parity, emit_serve
from kimi_bench.report.figures import saved_figures
from kimi_bench.report.html import write_html
from kimi_bench.report.junit import write_junit
from kimi_bench.report.model import Report
from kimi_bench.report.writers import atomic_write_text, markdown_table

FOLDER = {"parity": "parity", "micro": "micro", "serve-ab": "serve-ab"}


class Progress(Protocol):
    """What the runner reports to (``cli.progress.JobProgress``): parts and their steps."""

    def part(self, name: str, total: int = 0, unit: str = "steps") -> None: ...

    def step(self, done: int, total: int | None = None, item: str = "") -> None: ...


class _Silent:
    def part(self, name: str, total: int = 0, unit: str = "steps") -> None:
        pass

    def step(self, done: int, total: int | None = None, item: str = "") -> None:
        pass


def _serve(sc: RunOptions, out: Path, say: Callable[[str], None], progress: Progress) -> Report:
    assert sc.serve_ab is not None
    dev = resolve_device(sc.serve_ab.device)
    sopts, profile = resolve_defaults(sc.serve_ab, "serve_ab", dev.type)
    say(f"serve-ab: rates {','.join(str(r) for r in sopts.rates)}, {sopts.requests} requests")
    total = len(sopts.rates) * sopts.repeats * len(sopts.arms)
    progress.part("serve-ab", total, "pipelines")
    start, error = host_load(), None

    def on_run(runs: list[ServeRun]) -> None:
        last = runs[-1]
        progress.step(len(runs), item=f"{last.arm} @ {last.rate_label}")

    try:
        runs = run_serve_ab(sopts, on_run)
    except ServeFailed as exc:
        runs, error = exc.runs, str(exc)
    rep = build_serve_report(sopts, runs, dev, error, profile, start)
    emit_serve(rep, out / "serve-ab")
    return rep


def interrupted(rep: Report) -> str | None:
    """The signal that stopped a part's run, as its report names it (None otherwise)."""
    s = rep.summary
    error = s.get("error")
    if is_interrupt(error):
        return str(error)
    verdict = str(s.get("verdict") or "")
    if verdict.startswith("INCOMPLETE: ") and is_interrupt(verdict[12:]):
        return verdict[12:].split(" after ")[0]
    return None


def _parity(sc: RunOptions, out: Path, say: Callable[[str], None], prog: Progress) -> Report:
    assert sc.parity is not None
    say("parity: eager vs deferred on the built-in corpus")
    prog.part("parity", 0, "inputs")
    rep = run_parity(sc.parity, progress=lambda name, d, t: prog.step(d, t, name))
    emit_parity(rep, out / "parity")
    return rep


def _micro(sc: RunOptions, out: Path, say: Callable[[str], None], prog: Progress) -> Report:
    assert sc.micro is not None
    say(
        f"micro: {sc.micro.synthetic}, arms {','.join(sc.micro.arms)}, "
        f"{sc.micro.launches} launch(es)"
    )
    prog.part("micro", 0, "repeats")
    try:
        rep = run_micro(sc.micro, lambda d, t: prog.step(d, t))
    except MicroFailed as exc:
        rep = exc.report
    emit_micro(rep, out / "micro")
    return rep


def run_scenario(
    sc: RunOptions,
    out: Path,
    say: Callable[[str], None] = lambda _: None,
    progress: Progress | None = None,
) -> tuple[list[RuleResult], list[Report]]:
    """Every part of the scenario, then the gate; ``progress`` hears of each part and
    its steps (inputs, repeats, pipelines). A part stopped by SIGINT/SIGTERM ends the run
    (the parts not started are not run; the gate fails the stopped one)."""
    prog: Progress = progress or _Silent()
    reports: list[Report] = []
    if sc.parity is None and sc.micro is None and sc.serve_ab is None:
        raise ScenarioError(
            "the scenario runs nothing: give at least one of [parity], [micro], [serve_ab]"
        )
    parts: list[tuple[str, Callable[[], Report]]] = []
    if sc.parity is not None:
        parts.append(("parity", lambda: _parity(sc, out, say, prog)))
    if sc.micro is not None:
        parts.append(("micro", lambda: _micro(sc, out, say, prog)))
    if sc.serve_ab is not None:
        parts.append(("serve-ab", lambda: _serve(sc, out, say, prog)))
    for i, (_, part) in enumerate(parts):
        rep = part()
        reports.append(rep)
        reason = interrupted(rep)
        if reason:  # SIGINT/SIGTERM: the parts not started are not run (the gate fails)
            left = ", ".join(name for name, _ in parts[i + 1 :])
            say(f"{reason}: stopping" + (f" (not run: {left})" if left else ""))
            break
    prog.part("gate and index")
    rules = load_rules(resolve_path(sc.gate.rules))
    base = Path(sc.gate.baseline) if sc.gate.baseline else None
    allow = Allow(sc.gate.allow_no_baseline, sc.gate.allow_eager_baseline_mismatch)
    outcome = run_gate(reports, rules, base, allow=allow)
    results = outcome.results
    rows = [r.as_dict() for r in results]
    write_junit(results, out / "gate.xml")
    verdict = outcome.verdict()
    atomic_write_text(out / "gate.md", f"# {verdict}\n\n" + markdown_table(rows) + "\n")
    _index(out, sc, reports, verdict, results)
    return results, reports


def _index(
    out: Path, sc: RunOptions, reports: list[Report], verdict: str, gate: list[RuleResult]
) -> None:
    lines = [
        "# kimi-bench run\n",
        sc.description,
        "",
        f"**{verdict}** ([rules and verdicts](gate.md), "
        "[JUnit](gate.xml)); everything on one page: [index.html](index.html)\n",
    ]
    for rep in reports:
        d = FOLDER[rep.kind]
        lines.append(
            f"- **{rep.kind}** - {rep.summary.get('verdict')} "
            f"([report]({d}/report.md), [json]({d}/report.json), [html]({d}/report.html))"
        )
    atomic_write_text(out / "index.md", "\n".join(lines) + "\n")
    dicts = [r.to_dict() for r in reports]
    figures = [saved_figures(d, out / FOLDER[r.kind]) for d, r in zip(dicts, reports, strict=True)]
    write_html(reports, out / "index.html", title="kimi-bench run", gate=gate, figures=figures)
