"""Where a command's files go, checked before the work and rescued after it.

``check_output_dir(out)`` runs when a command starts: the folder (or the nearest existing
folder above it, when it is still to be created) must be a folder this process can write
in; a path below a file or a read-only folder is refused before any measurement runs.

``claim_output_dir(out)`` then makes the folder this run's: an exclusive lock on a
``.kimi-bench.lock`` file in it (``flock``: the kernel drops it when the process ends, so a
killed run never leaves a stale claim). Releasing the claim removes the file (while the
lock is still held; a run that then locks a file removed under it tries again), so a
finished folder holds its report and no lock file. A second run given a folder that
another run holds is refused (exit 2), and so is a folder that already holds a finished
report (``report.json``, or ``index.md`` of ``kimi-bench run``) unless ``overwrite`` is
set: no finished result is lost to a later run. Every file is written to a temporary name in the
folder and renamed into place when complete, ``report.json`` last. ``claim_output(out)``
holds a folder for this process (released at exit, or by ``release_claims``);
``claim_default(base)`` holds ``base`` or the first free ``base-2``, ``base-3``...

``write_file(path, data, option)`` writes one file the user named (``--append-jsonl``,
``gate --junit``/``--summary``, ``compare --markdown``, ``render --html``): completely, or
a ``WriteFailed`` naming the option, the path and why (the commands exit 3 then). A new
or regular file is replaced atomically (or appended to and synced); an existing special
file (``/dev/stdout``, a pipe, ``/dev/full``) is written in place, never replaced.

``write_outputs(write, out)`` runs at the end: if writing into ``out`` fails anyway (disk
full, folder removed or made read-only during the run), every file is written again into
a fresh temporary folder, and the result says where and why. Commands then exit with
``EXIT_OUTPUT_INCOMPLETE`` (3): the run itself finished, its report is at the printed
fallback path, not where it was asked for.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import errno
import fcntl
import os
import socket
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kimi_bench.infra.limits import describe_os_error
from kimi_bench.report.writers import atomic_write_bytes

EXIT_OUTPUT_INCOMPLETE = 3
_PROBE_BYTES = 4096
LOCK_NAME = ".kimi-bench.lock"
# Files whose presence means a finished report is in a folder.
REPORT_MARKERS = ("report.json", "report.json.gz", "index.md")
# Every file a report folder of any kind holds (tests/bad_inputs/test_writes.py checks
# that the commands write no other name) and the subfolders a run writes (the parts of
# ``kimi-bench run``, serve-ab's server logs): what ``--overwrite`` removes first, so that
# no file of the report it replaces stays beside the new one. Other files are the user's.
REPORT_FILES = frozenset(
    {
        *("report.json", "report.json.gz", "report.md", "report.html", "index.md", "index.html"),
        *("parity.csv", "stages.csv", "requests.csv", "validation.csv", "projection.csv"),
        *("calibration.md", "calibration.json", "rules.toml", "gate.xml", "gate.md"),
        *("parity_grid.png", "stages.png", "timeline.png", "payload.png", "projection.png"),
        *("ttft_vs_rate.png", "throughput.png", "ttft_cdf.png", "stage_waterfall.png"),
    }
)
REPORT_FOLDERS = ("parity", "micro", "serve-ab", "servers")


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
    """Refuse an output file (``--junit``, ``--summary``) whose folder cannot be written.
    An existing special file (``/dev/stdout``, a pipe) is written into: its folder is not
    probed."""
    if path.is_dir():
        raise OutputError(f"{option} {path} is a folder, not a file")
    if not _special(path):
        check_output_dir(path.parent, option)


class WriteFailed(OSError):
    """A file the user asked for could not be written; the message names it and why."""


def _special(path: Path) -> bool:
    """An existing file that is not a regular file or a folder (a device, a pipe)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_in_place(path: Path, data: bytes, append: bool) -> None:
    """Append to (or write into a special file) in place; a failed append to a regular
    file is cut back to where it was, so no half line stays behind."""
    with open(path, "ab" if append else "wb") as fh:
        regular = stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
        start = fh.tell() if regular else 0
        try:
            fh.write(data)
            fh.flush()
            if regular:
                os.fsync(fh.fileno())
        except OSError:
            if regular:
                with contextlib.suppress(OSError):
                    os.ftruncate(fh.fileno(), start)
            raise


def write_file(path: Path, data: str | bytes, option: str, *, append: bool = False) -> Path:
    """Write (or, ``append``, add to) a file the user named with ``option``: all of
    ``data`` reaches it, or WriteFailed says which file and why (a full disk, a folder in
    the way, a permission). Never leaves a partial file behind a replaced one."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file")
        if append or _special(path):
            _write_in_place(path, raw, append)
        else:
            atomic_write_bytes(path, raw)
    except OSError as exc:
        raise WriteFailed(f"{option} {path} was not written: {describe_os_error(exc)}") from None
    return path


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


class OutputClaim:
    """This process's hold on an output folder (see :func:`claim_output_dir`)."""

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder = folder
        self._fd: int | None = fd

    def release(self) -> None:
        """Remove the lock file and drop the lock (the kernel drops it when the process
        ends; the file then stays, and the next run takes it over)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if _same_file(fd, self.folder / LOCK_NAME):
                    os.unlink(self.folder / LOCK_NAME)
            except OSError:
                pass  # a folder removed or made read-only during the run: the lock goes anyway
            finally:
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not removed or replaced)."""
    try:
        st, now = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)


def _report_file(p: Path) -> bool:
    return (
        p.is_file()
        and not p.is_symlink()
        and (p.name in REPORT_FILES or (p.name.startswith("server-") and p.suffix == ".log"))
    )


def clear_report(folder: Path) -> list[Path]:
    """Remove the files of the report ``folder`` holds (``REPORT_FILES``, the part and log
    subfolders' files, then those subfolders when empty); returns what was removed. Files
    of other names are left where they are."""
    removed: list[Path] = []
    for p in sorted(folder.iterdir()):
        if _report_file(p):
            p.unlink()
            removed.append(p)
        elif p.name in REPORT_FOLDERS and p.is_dir() and not p.is_symlink():
            removed += clear_report(p)  # a part of a run, serve-ab's server logs
            with contextlib.suppress(OSError):
                p.rmdir()  # only when empty: a user's file keeps it
    return removed


def _holder(lock: Path) -> str:
    try:
        text = lock.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "another kimi-bench run"
    return text.splitlines()[0][:200] if text else "another kimi-bench run"


def _lock(out: Path, lock: Path, option: str) -> int:
    """Open and exclusively lock ``lock`` (OutputError when another run holds it)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise OutputError(f"{option} {out}: cannot create it: {describe_os_error(exc)}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise OutputError(f"{option} {out}: cannot lock it: {describe_os_error(exc)}") from None
        raise OutputError(
            f"{option} {out} is in use by {_holder(lock)}; two runs never share a folder: "
            "give this run another --output-dir"
        ) from None
    return fd


def claim_output_dir(
    out: Path, option: str = "--output-dir", *, overwrite: bool = False
) -> OutputClaim:
    """Create ``out`` and hold it for this run; OutputError (a usage error) when another
    run holds it or, unless ``overwrite``, when it holds a finished report already."""
    check_output_dir(out, option)
    lock = out / LOCK_NAME
    for _ in range(20):  # the file a finishing run removes is locked again under its name
        fd = _lock(out, lock, option)
        if _same_file(fd, lock):
            break
        os.close(fd)
    else:
        raise OutputError(f"{option} {out}: its lock file keeps being replaced; try again")
    claim = OutputClaim(out, fd)
    finished = [m for m in REPORT_MARKERS if (out / m).is_file()]
    if finished and not overwrite:
        claim.release()
        raise OutputError(
            f"{option} {out} already holds a finished report ({', '.join(finished)}); give a "
            "new folder, or --overwrite to replace it"
        )
    if finished:
        try:
            clear_report(out)
        except OSError as exc:
            claim.release()
            raise OutputError(
                f"{option} {out}: cannot remove the report it replaces: {describe_os_error(exc)}"
            ) from None
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    os.ftruncate(fd, 0)
    os.pwrite(
        fd, f"kimi-bench pid {os.getpid()} on {socket.gethostname()}, since {stamp}\n".encode(), 0
    )
    return claim


def claim_default(base: Path) -> Path:
    """The default folder, or ``<base>-2``, ``-3``... when a run started in the same second
    holds it: runs left to their default folders never collide."""
    for n in range(1, 100):
        out = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            claim_output(out)
            return out
        except OutputError:
            if not out.is_dir():
                raise  # not a taken folder: a real problem (read-only, a file in the way)
    raise OutputError(f"no free output folder next to {base}; give --output-dir")


_claims: list[OutputClaim] = []  # this process's output folders


def claim_output(out: Path, option: str = "--output-dir", *, overwrite: bool = False) -> None:
    """Hold ``out`` for this command; released (its lock file removed) when the process
    exits, so a finished folder holds no lock file (the kernel drops the hold of a killed
    process). An OutputError (a ValueError: a usage error) when another run holds it or it
    holds a finished report and ``overwrite`` is not set."""
    if not _claims:
        atexit.register(release_claims)
    _claims.append(claim_output_dir(out, option, overwrite=overwrite))


def release_claims() -> None:
    """Drop the holds of earlier commands run in this process (CliRunner, library use)."""
    while _claims:
        _claims.pop().release()
