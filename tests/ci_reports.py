"""Reports for the gate's tests, built by the real report builders from synthetic raw data
(per-repeat records, per-request records, per-input rows), so every summary is what
kimi-bench itself derives. Tests that need a broken report edit the returned dict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from kimi_bench.bench.micro import build_report
from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.bench.serve_runs import Placement, ServedRequest, ServeRun
from kimi_bench.domain.config import resolve_config
from kimi_bench.domain.stages import STAGES
from kimi_bench.options import MicroOptions, ServeOptions
from kimi_bench.report.model import Report

CPU = torch.device("cpu")


def _rec(arm: str, total: float, i: int, exact: bool, moved: int) -> dict[str, Any]:
    share = total / len(STAGES)
    return {
        "stage_ms": {s: share for s in STAGES},
        "stage_bytes": {s: 0 for s in STAGES},
        "total_ms": share * len(STAGES),
        "copies": [
            {
                "stage": "owner_h2d",
                "op": "h2d",
                "src": "host",
                "dst": "device",
                "bytes": moved,
                "count": 1,
                "copies": True,
                "mirrors": "test",
            },
        ],
        "decisions": None,
        "bit_exact": exact if arm != "eager" else None,
        "bit_exact_fp32": exact if arm != "eager" else None,
        "iteration": i,
        "timeline": [],
    }


def micro(
    deferred_ms: list[float],
    speedup: float | list[float] = 5.0,
    *,
    exact: bool = True,
    error: str | None = None,
    planned: int | None = None,
    ranks: int = 2,
    groups: str = "4x1536x1024",
    floor_ms: float = 1.0,
    control: dict[str, list[float]] | None = None,
    launches: int = 1,
) -> Report:
    """A micro report: eager totals are ``speedup`` x the deferred ones (per repeat);
    ``control``: arm -> the totals of its control rounds (none by default); ``launches``:
    the repeats split in that many process launches, in order (each record says which)."""
    ups = speedup if isinstance(speedup, list) else [speedup] * len(deferred_ms)
    opts = MicroOptions(
        synthetic=groups,
        ranks=ranks,
        repeats=planned or max(1, len(deferred_ms) // launches),
        warmup=0,
        device="cpu",
        launches=launches,
    )
    pairs = enumerate(zip(deferred_ms, ups, strict=True))
    samples = {
        "eager": [_rec("eager", d * u, i, True, 4000) for i, (d, u) in pairs],
        "deferred": [_rec("deferred", d, i, exact, 1000) for i, d in enumerate(deferred_ms)],
    }
    if launches > 1:
        for recs in samples.values():
            for r in recs:
                r["launch"] = r["iteration"] * launches // len(recs)
    cfg = resolve_config("kimi-k3", None)
    rounds = {a: [_rec(a, ms, i, exact, 10) for i, ms in enumerate(xs)]
              for a, xs in (control or {}).items()}  # fmt: skip
    if rounds:
        opts = opts.model_copy(update={"control_repeats": max(map(len, rounds.values()))})
    return build_report(opts, cfg, CPU, samples, {"floor_ms": floor_ms}, error, [], "cpu",
                        control=rounds)  # fmt: skip


def _records(ttfts: list[float], start: float, fail: set[int]) -> list[ServedRequest]:
    out = []
    for i, ttft in enumerate(ttfts):
        sent = start + 0.01 * i
        base = {"rid": i, "scheduled_s": 0.01 * i, "t_sent": sent, "facts": {"batch_id": i}}
        if i in fail:
            out.append(ServedRequest(**base, status=500, error="HTTP 500", error_kind="http"))
        else:
            out.append(ServedRequest(**base, status=200, t_first=sent + ttft / 1e3, ttft_ms=ttft))
    return out


def serve(
    ttft: dict[str, list[float]],
    *,
    rate: str = "inf",
    fail: dict[str, set[int]] | None = None,
    error: str | None = None,
    planned: int | None = None,
) -> Report:
    """A serve-ab report at one rate; ``ttft``: arm -> per-request TTFTs (ms)."""
    arms = tuple(ttft)
    n = planned or max(len(v) for v in ttft.values())
    opts = ServeOptions(rates=rate, requests=n, arms=arms, ranks=2, resolution=(64, 48),
                        device="cpu")  # fmt: skip
    runs = []
    for arm, xs in ttft.items():
        at = Placement(opts.rates[0], rate, 0, 0, (0.0,) * len(xs))
        records = _records(xs, 100.0, (fail or {}).get(arm, set()))
        runs.append(ServeRun(arm=arm, at=at, records=records, trace_start=100.0))
    return build_serve_report(opts, runs, CPU, error, "cpu")


def junit_reasons(junit: Path) -> str:
    """Every rule's whole reason from a gate's JUnit file, a line each (piped console
    tables fold long reasons inside their cells); empty when the file was not written."""
    if not junit.exists():
        return ""
    import xml.etree.ElementTree as ET

    cases = ET.parse(junit).getroot().iter("testcase")
    return "".join(" ".join(n.get("message") or n.text or "" for n in c) + "\n" for c in cases)


def put(report: Report | dict[str, Any], folder: Path) -> Path:
    """Write ``report`` as ``folder/report.json`` (final, as the writers mark it)."""
    raw = report.to_dict() if isinstance(report, Report) else report
    raw.setdefault("final", True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(raw))
    return folder / "report.json"


def parity(names: tuple[str, ...] = ("a.png", "b.jpg"), bad: str | None = None) -> Report:
    """A parity report over ``names``; ``bad`` differs in FP32."""
    from kimi_bench.bench.parity import _build_report
    from kimi_bench.infra.environment import host_load
    from kimi_bench.options import ParityOptions

    rows = [
        {"name": n, "width": 64, "height": 48, "mode": "RGB", "deferred": True, "reason": "test",
         "grid_thw": [1, 4, 4], "owner_rank": 0, "bit_exact_fp32": n != bad,
         "bit_exact_bf16": True, "max_abs_diff_vs_pil": 0.0, "error": None}
        for n in names
    ]  # fmt: skip
    opts = ParityOptions(device="cpu")
    cfg = resolve_config("kimi-k3", None)
    return _build_report(opts, cfg, rows, CPU, len(rows), host_load())
