"""Where a command's files go, checked before the work and rescued after it.

``check_output_dir(out)`` runs when a command starts: the folder (or the nearest existing
folder above it, when it is still to be created) must be a folder this process can write
in; a path below a file or a read-only folder is refused before any measurement runs.

``write_outputs(write, out)`` runs at the end: if writing into ``out`` fails anyway (disk
full, folder removed or made read-only during the run), every file is written again into
a fresh temporary folder, and the result says where and why. Commands then exit with
``EXIT_OUTPUT_INCOMPLETE`` (3): the run itself finished, its report is at the printed
fallback path, not where it was asked for.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kimi_bench.limits import describe_os_error

EXIT_OUTPUT_INCOMPLETE = 3
_PROBE_BYTES = 4096


class OutputError(ValueError):
    """An output location that cannot be written; the message names it and why."""


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _probe(folder: Path) -> None:
    """Create, fill and remove a small file in ``folder`` (os.access is not enough: root
    passes it everywhere, and it says nothing about a full or read-only file system)."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=".kimibench-probe-")
    try:
        os.write(fd, b"\0" * _PROBE_BYTES)
    finally:
        os.close(fd)
        os.unlink(name)


def check_output_dir(out: Path, option: str = "--out") -> None:
    """Refuse an output folder that cannot be created or written (OutputError)."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"{option} {out} is a file, not a folder")
    anchor = _nearest_existing(out)
    if not anchor.is_dir():
        raise OutputError(f"{option} {out}: {anchor} is a file, so no folder can be made below it")
    try:
        _probe(anchor)
    except OSError as exc:
        raise OutputError(
            f"{option} {out}: cannot write in {anchor}: {describe_os_error(exc)}"
        ) from None


def check_output_file(path: Path, option: str) -> None:
    """Refuse an output file (``--junit``, ``--summary``) whose folder cannot be written."""
    if path.is_dir():
        raise OutputError(f"{option} {path} is a folder, not a file")
    check_output_dir(path.parent, option)


@dataclass
class Written:
    """What ``write_outputs`` did: the folder the files are in and whether it is a fallback."""

    folder: Path
    files: list[Path]
    fallback: bool = False
    error: str | None = None  # why the folder asked for could not be used

    @property
    def exit_code(self) -> int:
        """0, or EXIT_OUTPUT_INCOMPLETE when the files are at the fallback location."""
        return EXIT_OUTPUT_INCOMPLETE if self.fallback else 0


def write_outputs(write: Callable[[Path], list[Path]], out: Path) -> Written:
    """``write(folder)`` into ``out``; on an OSError, into a new temporary folder.

    Raises OutputError (naming both failures) only when the fallback fails too."""
    try:
        return Written(out, write(out))
    except OSError as exc:
        reason = f"{out}: {describe_os_error(exc)}"
    try:
        rescue = Path(tempfile.mkdtemp(prefix=f"kimibench-rescue-{os.getpid()}-"))
        return Written(rescue, write(rescue), fallback=True, error=reason)
    except OSError as exc:
        raise OutputError(
            f"cannot write the report to {reason}, nor to a temporary folder: "
            f"{describe_os_error(exc)}"
        ) from None
