"""What ``parity`` writes besides its report folder, checked before any input is read.

- ``--dump DIR`` never replaces a file already there unless ``--overwrite`` is given (the
  names are known once the corpus is listed, so the check runs before the first input).
- Neither the report folder nor the dump folder may be the ``--images`` folder: the report
  (``parity_grid.png``) and the dumps (``.pt``) would become inputs of the next run.
- A dump that cannot be written (a full disk) stops the dumping, not the run; the report
  says so and the command exits 3 naming the file.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch

from kimi_bench.domain.corpus import dump_filename
from kimi_bench.report.output import OutputError, WriteFailed, check_output_dir, write_file


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.absolute() == b.absolute()


def check_not_inputs(images: Path | None, out: Path | None, dump: Path | None) -> None:
    """OutputError (a usage error) when the report or dump folder is the images folder."""
    if images is None:
        return
    for option, folder in (("--output-dir", out), ("--dump", dump)):
        if folder is not None and _same_folder(folder, images):
            raise OutputError(
                f"{option} {folder} is the --images folder: the files written there would be "
                "read as inputs by the next run; give another folder"
            )
    if dump is not None:
        check_output_dir(dump, "--dump")


def check_dump(dump: Path | None, names: list[str], overwrite: bool) -> None:
    """OutputError when a dump file of this run exists already and ``overwrite`` is off."""
    if dump is None or overwrite:
        return
    taken = [n for n in map(dump_filename, names) if os.path.lexists(dump / n)]
    if taken:
        more = f" and {len(taken) - 1} more" if len(taken) > 1 else ""
        raise OutputError(
            f"--dump {dump} already holds {taken[0]}{more}; give an empty folder, or "
            "--overwrite to replace them"
        )


class DumpWriter:
    """Writes ``DIR/<name>.pt`` per input; the first failure is kept (``error``) and ends
    the dumping, so a full disk costs the dumps, never the measured results."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.error: str | None = None

    def save(self, name: str, payload: dict[str, Any]) -> None:
        if self.folder is None or self.error is not None:
            return
        buf = io.BytesIO()
        torch.save(payload, buf)
        try:
            write_file(self.folder / dump_filename(name), buf.getvalue(), "--dump")
        except WriteFailed as exc:
            self.error = str(exc)
