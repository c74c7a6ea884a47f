"""One writer per format: JSON (the machine-readable truth), Markdown, CSV.

Every file is written atomically: into a temp file in the same folder, flushed to disk,
then renamed over the target. A crash or a full disk leaves either the old file or the new
one, never half of one, and the temp file is removed on any failure. Text taken from a
report (names, notes, reasons) is HTML-escaped in Markdown, so a report field can never
inject markup into a rendered summary.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kimi_bench.report.model import Report


def _final_mode(path: Path) -> int:
    """Keep an existing file's permissions; new files get rw-r--r--."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return 0o644


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(name, _final_mode(path))
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        raise
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(report: Report, path: Path) -> Path:
    return atomic_write_text(path, json.dumps(report.to_dict(), indent=1) + "\n")


def md_text(v: Any) -> str:
    """Text for Markdown: HTML special characters escaped, one line."""
    return html.escape(str(v), quote=False).replace("\n", " ")


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return md_text("x".join(str(x) for x in v))
    return md_text(v).replace("|", "\\|")


def markdown_table(rows: list[dict[str, Any]], columns: Iterable[str] | None = None) -> str:
    if not rows:
        return "_(none)_\n"
    cols = list(columns) if columns else list(rows[0])
    lines = ["| " + " | ".join(_cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def render_markdown(report: Report, title: str | None = None) -> str:
    env = report.environment
    raw_git = env.get("git")
    git: dict[str, Any] = raw_git if isinstance(raw_git, dict) else {}
    e = {k: md_text(v) for k, v in env.items() if not isinstance(v, dict)}
    head = md_text(title or f"kimi-bench {report.kind} report")
    out = [f"# {head}\n"]
    verdict = report.summary.get("verdict")
    if verdict:
        out.append(f"**Verdict:** {md_text(verdict)}\n")
    out.append(
        f"- device: {e.get('device_name')} ({e.get('device')}), torch {e.get('torch')}, "
        f"CUDA {e.get('cuda')}, Python {e.get('python')}\n"
        f"- kimi-bench {e.get('package_version')}, "
        f"commit {md_text(str(git.get('commit', '?'))[:12])}"
        f"{' (dirty)' if git.get('dirty') else ''}, preset {e.get('preset')}, "
        f"seed {e.get('seed')}, created {e.get('created')}\n"
    )
    if report.notes:
        out.append("## Notes\n")
        out += [f"- {md_text(n)}" for n in report.notes]
        out.append("")
    scalar = {k: v for k, v in report.summary.items() if not isinstance(v, (dict, list))}
    if scalar:
        out.append("## Summary\n")
        out.append(markdown_table([{"metric": k, "value": v} for k, v in scalar.items()]))
    for view in report.views:
        out.append(f"## {md_text(view.title)}\n")
        out.append(markdown_table(view.rows, view.columns))
    return "\n".join(out)


def write_markdown(report: Report, path: Path, title: str | None = None) -> Path:
    return atomic_write_text(path, render_markdown(report, title))


def write_csv(rows: list[dict[str, Any]], path: Path, columns: list[str] | None = None) -> Path:
    """Rows to CSV through pandas; list cells (grid_thw) become ``1x36x46``."""
    import pandas as pd

    flat = [
        {k: ("x".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for k, v in r.items()}
        for r in rows
    ]
    frame = pd.DataFrame(flat, columns=columns or (list(flat[0]) if flat else []))
    return atomic_write_text(path, frame.to_csv(index=False))
