"""Write a scenario's report folder: one function per kind, shared by the commands and by
``kimi-bench run``. Returns the files written (charts are skipped without matplotlib)."""

from __future__ import annotations

from pathlib import Path

from kimi_bench.report.model import Report
from kimi_bench.report.plots import stage_bars, ttft_cdf, ttft_vs_rate
from kimi_bench.report.writers import write_csv, write_json, write_markdown


def emit_parity(report: Report, out: Path) -> list[Path]:
    return [
        write_json(report, out / "report.json"),
        write_markdown(report, out / "report.md"),
        write_csv(report.results, out / "parity.csv"),
    ]


def emit_micro(report: Report, out: Path) -> list[Path]:
    files = [
        write_json(report, out / "report.json"),
        write_markdown(report, out / "report.md"),
        write_csv(report.results, out / "stages.csv"),
    ]
    cfg = report.config
    title = f"{cfg.get('images')}, {cfg.get('ranks')} ranks, {cfg.get('transport')}"
    arms = report.data["arms"]
    stages = list(next(iter(arms.values()))["stages"]) if arms else []
    chart = stage_bars(arms, stages, title, out / "stages.png")
    return files + ([chart] if chart else [])


def emit_serve(report: Report, out: Path) -> list[Path]:
    files = [
        write_json(report, out / "report.json"),
        write_markdown(report, out / "report.md"),
        write_csv(report.data["requests"], out / "requests.csv"),
    ]
    series: dict[str, list[float]] = {}
    for r in report.data["requests"]:
        if r.get("ttft_ms") is not None:
            series.setdefault(f"{r['arm']} @ {r['rate']}", []).append(r["ttft_ms"])
    rates = report.summary["rates"]
    lines: dict[str, list[float | None]] = {}
    for arm in ("eager", "deferred"):
        for stat in ("median", "p90"):
            by_rate = {r["rate"]: r[f"ttft_{stat}_ms"] for r in report.results if r["arm"] == arm}
            if by_rate:
                lines[f"{arm} {stat}"] = [by_rate.get(rt) for rt in rates]
    for p in (
        ttft_cdf(series, "TTFT CDF per arm and rate", out / "ttft_cdf.png"),
        ttft_vs_rate(rates, lines, "TTFT vs request rate", out / "ttft_vs_rate.png"),
    ):
        if p:
            files.append(p)
    return files
