"""Bounded, non-blocking reads of the files a user hands in (reports, rules, configs).

``read_text_bounded`` opens with ``O_NONBLOCK`` and checks ``fstat`` on the opened
descriptor before reading, so a FIFO, a socket or a device (``/dev/zero``) is refused
instead of blocking or filling memory, and it reads at most ``limit`` bytes. (Numeric
option bounds live in ``kimi_bench.options``.)
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# Largest report, rules, scenario or config file read (reports hold raw samples: the
# H200 serve-ab baselines are ~0.5 MB).
MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024


class LimitError(ValueError):
    """A value or a file outside the documented bounds; the message names it."""


def file_kind(mode: int) -> str:
    """A reader's name for what a ``st_mode`` describes."""
    if stat.S_ISREG(mode):
        return "regular file"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "special file"


def open_regular(path: str | Path, what: str = "file") -> int:
    """A read-only descriptor of ``path``, refused unless it is a regular file.

    ``O_NONBLOCK`` makes opening a FIFO return at once (no writer needed); ``fstat`` on the
    opened descriptor then decides, so a file swapped between a check and the open is
    still caught. Raises LimitError (not a regular file) or OSError (missing, denied)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise LimitError(f"{what} {path} is a {file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes_bounded(path: str | Path, limit: int, what: str = "file") -> bytes:
    """At most ``limit`` bytes of a regular file; more is an error naming the size."""
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise LimitError(f"{what} {path} is larger than {limit:,} bytes; not a kimi-bench {what}")
    return data


def read_text_bounded(path: str | Path, limit: int, what: str = "file") -> str:
    """UTF-8 text of a regular file of at most ``limit`` bytes.

    Raises FileNotFoundError, LimitError (special file, too large, not UTF-8) or another
    OSError (permission, I/O); callers turn them into their own error type."""
    data = read_bytes_bounded(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LimitError(f"{what} {path} is not UTF-8 text: {exc}") from None


def describe_os_error(exc: OSError) -> str:
    """``[Errno 13] Permission denied`` -> ``permission denied``."""
    text = exc.strerror or errno.errorcode.get(exc.errno or 0, "") or str(exc)
    return text[:1].lower() + text[1:]


def read_text_or(error: type[Exception], path: str | Path, limit: int, what: str) -> str:
    """:func:`read_text_bounded` with every failure turned into ``error`` naming ``what``
    and the path (missing, special or oversized file, not UTF-8, permission, I/O)."""
    try:
        return read_text_bounded(path, limit, what)
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except LimitError as exc:
        raise error(str(exc)) from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {describe_os_error(exc)}") from None
