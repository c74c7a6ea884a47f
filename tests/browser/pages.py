"""The HTML pages of every report kind, written by this checkout's code into a folder.

parity, micro and serve-ab come from the committed CPU run (``reports/examples/cpu-run``),
project is ``kimi-bench project`` calibrated on the committed H200 baselines; two serve-ab
states that a healthy run does not produce are adapted from the committed serve-ab report
in the shape serve-ab writes them: *partial* (the run stopped after the deferred arm's
server died: rate 4 complete, rate inf with eager only, ``summary.error`` set) and
*endpoint-only* (two external servers named ``base`` and ``deferred``: TTFT and status per
request, no stage times, no copy ledger). ``kimi-bench render`` then draws every figure and
``report.html`` from that data with the current code, and the run's ``index.html`` is the
page ``kimi-bench run`` writes (all three reports and the gate's verdicts)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CPU_RUN = REPO / "reports" / "examples" / "cpu-run"
H200_MICRO = REPO / "reports" / "baselines" / "h200" / "micro" / "sglang-0.5.23"

STAGE_FIELDS = ("queue_wait_ms", "producer_ms", "to_scheduler_ms", "sched_wait_ms", "step_ms")
PARTIAL_ERROR = "the emulator server of arm deferred exited with code -9 at rate inf"


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _put(report: dict[str, Any], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report, indent=1))
    return folder


def partial_serve(full: dict[str, Any]) -> dict[str, Any]:
    """serve-ab stopped after the deferred arm's server died at rate inf."""
    r = copy.deepcopy(full)
    keep = lambda row: row.get("rate") != "inf" or row.get("arm") == "eager"  # noqa: E731
    for key in ("results", "requests", "copies"):
        r[key] = [row for row in r.get(key) or [] if keep(row)]
    r["ab"] = {k: v for k, v in (r.get("ab") or {}).items() if k != "inf"}
    r["summary"] |= {"error": PARTIAL_ERROR, "verdict": "INCOMPLETE: " + PARTIAL_ERROR}
    r["notes"] = [*r.get("notes", []), f"run stopped early: {PARTIAL_ERROR}; results are partial."]
    return r


def endpoint_serve(full: dict[str, Any]) -> dict[str, Any]:
    """serve-ab against two external servers (``--endpoint base=URL --endpoint deferred=URL``)."""
    r = copy.deepcopy(full)
    name = {"eager": "base", "deferred": "deferred"}
    urls = {"base": "http://127.0.0.1:30000", "deferred": "http://127.0.0.1:30001"}
    drop = {*STAGE_FIELDS, "image_tokens", "patches", "feature_bytes", "deferred_images",
            "image_decisions",
            "producer_copied_bytes", "scheduler_copied_bytes", "batch_requests",
            "batch_id"}  # fmt: skip
    r["requests"] = [
        {k: v for k, v in q.items() if k not in drop} | {"arm": name[q["arm"]]}
        for q in r["requests"]
        if q["arm"] in name
    ]
    r["results"] = [
        {k: v for k, v in row.items() if k not in STAGE_FIELDS}
        | {"arm": name[row["arm"]], "bytes_moved": None, "dominant_stage": None}
        for row in r["results"]
        if row["arm"] in name
    ]
    r["copies"] = []
    r["config"] |= {
        "endpoints": [[a, u] for a, u in urls.items()],
        "arms": list(urls),
        "model": "kimi-k3",
        "arm_sources": {
            a: {"kind": "external", "url": u, "model": "kimi-k3"} for a, u in urls.items()
        },
    }
    r["summary"]["arms"] = list(urls)
    r["summary"]["verdict"] = r["summary"]["verdict"].replace("vs eager", "vs base")
    r["notes"] = [n for n in r["notes"] if "STAND-IN" not in n] + [
        "external servers (base, deferred): TTFT is the first streamed content token at the "
        "client; no per-stage times or copy ledger."
    ]
    return r


def write_report_folders(root: Path) -> dict[str, Path]:
    """kind -> folder holding its report.json (before rendering)."""
    serve = _load(CPU_RUN / "serve-ab" / "report.json")
    return {
        "parity": _put(_load(CPU_RUN / "parity" / "report.json"), root / "parity"),
        "micro": _put(_load(CPU_RUN / "micro" / "report.json"), root / "micro"),
        "serve-ab": _put(serve, root / "serve-ab"),
        "serve-ab-partial": _put(partial_serve(serve), root / "serve-ab-partial"),
        "serve-ab-endpoints": _put(endpoint_serve(serve), root / "serve-ab-endpoints"),
    }


def kimi_bench(*args: str, timeout_s: float = 600) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, f"kimi-bench {args[0]} failed:\n{done.stdout}\n{done.stderr}"


def write_projection(out: Path) -> Path:
    """``kimi-bench project`` on the committed 2-rank baselines, checked against 8 ranks."""
    b = H200_MICRO
    kimi_bench(
        "project", str(b / "r2-shm"), str(b / "r2-pickle"), "--ranks", "16,32,64",
        "--link-gbps", "100,400", "--validate", str(b / "r8-shm"), "--out", str(out),
    )  # fmt: skip
    return out


def write_run_index(root: Path, folders: dict[str, Path]) -> Path:
    """The page ``kimi-bench run`` writes: its three reports and the gate's verdicts."""
    from kimi_bench.bench.scenario import resolve_path
    from kimi_bench.ci.gate import evaluate, load_rules
    from kimi_bench.report.figures import saved_figures
    from kimi_bench.report.html import write_html
    from kimi_bench.report.model import load_report

    run = root / "run"
    for kind in ("parity", "micro", "serve-ab"):
        shutil.copytree(folders[kind], run / kind)
    reports = [load_report(run / k / "report.json") for k in ("parity", "micro", "serve-ab")]
    rows = evaluate(reports, load_rules(resolve_path("gate")), None)
    figures = [saved_figures(r.to_dict(), run / r.kind) for r in reports]
    return write_html(
        reports, run / "index.html", title="kimi-bench run", gate=rows, figures=figures
    )


def build_pages(root: Path) -> dict[str, Path]:
    """kind -> its HTML page, every kind written by this checkout's code under ``root``."""
    folders = write_report_folders(root)
    kimi_bench("render", *(str(f) for f in folders.values()))
    folders["project"] = write_projection(root / "project")
    pages = {kind: folder / "report.html" for kind, folder in folders.items()}
    pages["run-index"] = write_run_index(root, folders)
    return pages
