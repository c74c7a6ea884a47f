"""``kimi-bench run``: the main job on one scenario: parity, a small micro, a small
serve-ab, then the gate, into one folder with an ``index.md`` linking the parts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kimi_bench.bench.images import parse_image_spec
from kimi_bench.bench.micro import MicroFailed, MicroOptions, run_micro
from kimi_bench.bench.parity import ParityOptions, run_parity
from kimi_bench.bench.serve import ServeFailed, run_serve_ab, serve_options
from kimi_bench.bench.serve_report import build_serve_report
from kimi_bench.config import get_preset
from kimi_bench.environment import resolve_device
from kimi_bench.gate import RuleResult, evaluate, load_rules
from kimi_bench.report.emit import emit_micro, emit_parity, emit_serve
from kimi_bench.report.junit import write_junit
from kimi_bench.report.model import Report
from kimi_bench.report.writers import markdown_table
from kimi_bench.scenario import load_scenario, resolve_path


def run_scenario(
    scenario: str, out: Path, say: Callable[[str], None] = lambda _: None
) -> tuple[list[RuleResult], list[Report]]:
    sc = load_scenario(scenario)
    seed = sc.get("run", {}).get("seed", 0)
    reports: list[Report] = []
    if "parity" in sc:
        p = sc["parity"]
        say("parity: eager vs deferred on the built-in corpus")
        rep = run_parity(
            ParityOptions(
                cfg=get_preset(p.get("preset", "kimi-k3")),
                device=p.get("device", "auto"),
                ranks=p.get("ranks", 2),
                seed=seed,
                images_dir=Path(p["images"]) if p.get("images") else None,
            )
        )
        emit_parity(rep, out / "parity")
        reports.append(rep)
    if "micro" in sc:
        m = sc["micro"]
        say(f"micro: {m.get('images', '2x640x480')}, {m.get('ranks', 2)} ranks")
        opts = MicroOptions(
            cfg=get_preset(m.get("preset", "kimi-k3")),
            groups=parse_image_spec(m.get("images", "2x640x480")),
            ranks=m.get("ranks", 2),
            transport=m.get("transport", "shm"),
            device=m.get("device", "auto"),
            repeats=m.get("repeats", 5),
            warmup=m.get("warmup", 1),
            seed=seed,
            content=m.get("content", "random"),
        )
        try:
            rep = run_micro(opts)
        except MicroFailed as exc:
            rep = exc.report
        emit_micro(rep, out / "micro")
        reports.append(rep)
    if "serve_ab" in sc:
        sopts = serve_options(sc["serve_ab"], {"seed": seed})
        say(f"serve-ab: rates {','.join(map(str, sc['serve_ab'].get('rates', [])))}")
        error = None
        try:
            runs = run_serve_ab(sopts)
        except ServeFailed as exc:
            runs, error = exc.runs, str(exc)
        rep = build_serve_report(sopts, runs, resolve_device(sopts.device), error)
        emit_serve(rep, out / "serve-ab")
        reports.append(rep)
    gate_cfg = sc.get("gate", {})
    rules = load_rules(resolve_path(gate_cfg.get("rules", "gate")))
    base = Path(gate_cfg["baseline"]) if gate_cfg.get("baseline") else None
    results = evaluate(reports, rules, base)
    rows = [r.as_dict() for r in results]
    write_junit(rows, out / "gate.xml")
    failed = any(r.verdict == "fail" for r in results)
    (out / "gate.md").write_text(
        f"# gate: {'FAIL' if failed else 'PASS'}\n\n" + markdown_table(rows) + "\n"
    )
    _index(out, sc, reports, failed)
    return results, reports


def _index(out: Path, sc: dict[str, Any], reports: list[Report], failed: bool) -> None:
    lines = [
        "# kimi-bench run\n",
        sc.get("run", {}).get("description", ""),
        "",
        f"**Gate: {'FAIL' if failed else 'PASS'}** ([rules and verdicts](gate.md), "
        "[JUnit](gate.xml))\n",
    ]
    folder = {"parity": "parity", "micro": "micro", "serve-ab": "serve-ab"}
    for rep in reports:
        d = folder[rep.kind]
        lines.append(
            f"- **{rep.kind}** - {rep.summary.get('verdict')} "
            f"([report]({d}/report.md), [json]({d}/report.json))"
        )
    (out / "index.md").write_text("\n".join(lines) + "\n")
