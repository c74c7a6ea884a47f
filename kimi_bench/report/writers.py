"""One writer per format: JSON (the machine-readable truth), Markdown, CSV.

Every file is written atomically: into a temp file in the same folder, flushed to disk,
then renamed over the target. A crash or a full disk leaves either the old file or the new
one, never half of one, and the temp file is removed on any failure. Text taken from a
report (names, notes, reasons) is quoted by ``report.quote`` for each format: no Markdown
link, HTML or line break made of a file name, no CSV cell read as a formula.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kimi_bench.report import quote
from kimi_bench.report.envelope import Git
from kimi_bench.report.model import Report
from kimi_bench.report.table import Table, render
from kimi_bench.report.view import View


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
    return write_json_doc(report.to_dict(), path)


def write_json_doc(doc: Mapping[str, object], path: Path) -> Path:
    """``report.json`` of a report's ``to_dict()`` (a View's ``data``)."""
    return atomic_write_text(path, json.dumps(doc, indent=1) + "\n")


def md_text(v: object) -> str:
    """Text for Markdown (``report.quote.md``): one line, no markup made of it."""
    return quote.md(v)


def markdown_table(
    rows: Sequence[Mapping[str, object]], columns: Iterable[str] | None = None
) -> str:
    """Plain rows (the gate's, compare's) as a GitHub table."""
    if not rows:
        return "_(none)_\n"
    cols = list(columns) if columns else list(rows[0])
    return table_markdown(Table.of_rows("", rows, cols))


def table_markdown(t: Table) -> str:
    """One table of ``report.tables`` as a GitHub table (numbers as every format writes
    them, text quoted: ``report.table.render``)."""
    return render(t).markdown


TONE_WORD = {"good": "ok", "bad": "BAD", "unresolved": "unresolved", "info": "note"}


def _head(view: View, title: str | None) -> list[str]:
    env, m = view.typed.environment, md_text
    git = env.git or Git()
    kind = view.typed.kind
    out = [f"# {md_text(title or f'kimi-bench {kind} report')}\n", "## Verdict\n"]
    out += [f"- **{TONE_WORD[ln.tone]}**: {md_text(ln.text)}" for ln in view.lines]
    out.append("")
    out.append(
        f"- device: {m(env.device_name)} ({m(env.device)}), torch {m(env.torch)}, "
        f"CUDA {m(env.cuda)}, Python {m(env.python)}\n"
        f"- kimi-bench {m(env.package_version)}, "
        f"commit {m(str(git.commit or '?')[:12])}"
        f"{' (dirty)' if git.dirty else ''}, preset {m(env.preset)}, "
        f"seed {m(env.seed)}, created {m(env.created)}\n"
    )
    return out


def render_markdown(view: View, title: str | None = None) -> str:
    """``report.md``: the verdict lines, the environment, the notes and every table of
    ``report.tables``, from the report's view (the same as the HTML page shows)."""
    out = _head(view, title)
    notes = view.notes
    if notes:
        out.append("## Notes\n")
        out += [f"- {md_text(n)}" for n in notes]
        out.append("")
    for r in view.rendered:
        out.append(f"## {md_text(r.table.title)}\n")
        if r.table.about:
            out.append(f"_{md_text(r.table.about)}_\n")
        out.append(r.markdown)
    return "\n".join(out)


def write_markdown(view: View, path: Path, title: str | None = None) -> Path:
    return atomic_write_text(path, render_markdown(view, title))


def write_csv(
    rows: Sequence[Mapping[str, object]], path: Path, columns: list[str] | None = None
) -> Path:
    """Rows to CSV through pandas; list cells (grid_thw) become ``1x36x46``; text cells are
    quoted against formula injection (``report.quote.csv_cell``)."""
    import pandas as pd

    flat = [
        {
            k: quote.csv_cell("x".join(map(str, v)) if isinstance(v, (list, tuple)) else v)
            for k, v in r.items()
        }
        for r in rows
    ]
    frame = pd.DataFrame(flat, columns=columns or (list(flat[0]) if flat else []))
    return atomic_write_text(path, frame.to_csv(index=False))
