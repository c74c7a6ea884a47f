"""One writer per format: JSON (the machine-readable truth), Markdown, CSV.

Writers write atomically (temp file + rename) so a crash never leaves half a report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kimi_bench.report.model import Report, View


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(report: Report, path: Path) -> Path:
    _atomic_write(path, json.dumps(report.to_dict(), indent=1) + "\n")
    return path


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict[str, Any]], columns: Iterable[str] | None = None) -> str:
    if not rows:
        return "_(none)_\n"
    cols = list(columns) if columns else list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def render_markdown(report: Report, title: str | None = None) -> str:
    env = report.environment
    git = env.get("git", {})
    head = title or f"kimi-bench {report.kind} report"
    out = [f"# {head}\n"]
    verdict = report.summary.get("verdict")
    if verdict:
        out.append(f"**Verdict:** {verdict}\n")
    out.append(
        f"- device: {env.get('device_name')} ({env.get('device')}), torch {env.get('torch')}, "
        f"CUDA {env.get('cuda')}, Python {env.get('python')}\n"
        f"- kimi-bench {env.get('package_version')}, commit {git.get('commit', '?')[:12]}"
        f"{' (dirty)' if git.get('dirty') else ''}, preset {env.get('preset')}, "
        f"seed {env.get('seed')}, created {env.get('created')}\n"
    )
    if report.notes:
        out.append("## Notes\n")
        out += [f"- {n}" for n in report.notes]
        out.append("")
    scalar = {k: v for k, v in report.summary.items() if not isinstance(v, (dict, list))}
    if scalar:
        out.append("## Summary\n")
        out.append(markdown_table([{"metric": k, "value": v} for k, v in scalar.items()]))
    for view in report.views:
        out.append(f"## {view.title}\n")
        out.append(markdown_table(view.rows, view.columns))
    return "\n".join(out)


def write_markdown(report: Report, path: Path, title: str | None = None) -> Path:
    _atomic_write(path, render_markdown(report, title))
    return path


def write_csv(rows: list[dict[str, Any]], path: Path, columns: list[str] | None = None) -> Path:
    """Rows to CSV through pandas; list cells (grid_thw) become ``1x36x46``."""
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    flat = [
        {k: ("x".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for k, v in r.items()}
        for r in rows
    ]
    frame = pd.DataFrame(flat, columns=columns or (list(flat[0]) if flat else []))
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path


def write_view_csv(view: View, path: Path) -> Path:
    return write_csv(view.rows, path, view.columns)
