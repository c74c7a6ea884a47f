"""What ``parity`` writes besides its report folder, checked before any input is read.

- ``--dump DIR`` never replaces a file already there unless ``--overwrite`` is given (the
  names are known once the corpus is listed, so the check runs before the first input).
- Neither the report folder nor the dump folder may be the ``--images`` folder: the report
  (``parity_grid.png``) and the dumps (``.pt``) would become inputs of the next run.
- A dump that cannot be written (a full disk) stops the dumping, not the run; the report
  says so and the command exits 3 naming the file.
- ``parity_report``: the report around a runtime's rows and summary (the options, the
  preprocessing and runtime profile, the environment with its host-load warning), one
  envelope for the SGLang and the vLLM parity.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch

from kimi_bench.domain.config import PreprocessConfig
from kimi_bench.domain.corpus import dump_filename
from kimi_bench.domain.runtime import get_profile
from kimi_bench.infra.environment import HostLoad, environment
from kimi_bench.options import ParityOptions
from kimi_bench.report.model import Report
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


def parity_report(
    opts: ParityOptions,
    cfg: PreprocessConfig,
    device: torch.device,
    load_start: HostLoad,
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    notes: list[str],
    **config: Any,
) -> Report:
    """A parity report: ``summary`` and ``rows`` with the options, the preprocessing, the
    runtime profile (and ``config``'s extra keys), the environment, ``notes`` then the
    user's notes and the host-load warning when there is one."""
    env = environment(
        device,
        cfg.name,
        opts.seed,
        load_start=load_start,
        owner_device_emulated=device.type == "cpu",
        metadata=dict(opts.metadata),
    )
    notes = notes + list(opts.notes)
    if warning := env["host_load"].get("warning"):
        notes.append(warning)
    cfg_doc = {
        **opts.model_dump(mode="json"),
        "preprocess": cfg.summary(),
        "runtime_profile": get_profile(opts.runtime_spec).summary(),
        **config,
    }
    return Report(
        kind="parity",
        environment=env,
        config=cfg_doc,
        results=rows,
        summary=summary,
        notes=notes,
    )
