"""Boundaries every input crosses: bounded, non-blocking file reads and the ranges of
numeric options (ranks, rates, timeouts).

Reading: ``read_text_bounded`` opens with ``O_NONBLOCK`` and checks ``fstat`` before
reading, so a FIFO, a socket or a device (``/dev/zero``) is refused instead of blocking
or filling memory, and reads at most ``limit`` bytes.

Ranges (each check raises ``LimitError`` naming the option and the allowed range):

- ``--ranks`` 1..``MAX_RANKS`` (64): every rank is a process with its own torch runtime
  (~300 MB resident on CPU); 64 = 8 nodes of 8 GPUs, the largest tensor-parallel group
  the runtime deploys. Beyond that a single host measures only the OS scheduler.
- request rates: ``inf`` (all requests at once) or a finite rate within
  ``MIN_RATE``..``MAX_RATE`` requests/s (1e-3 is one request every ~17 minutes; 1e6 is
  beyond any single host's producer throughput, and inter-arrival gaps below 1 us are
  below the clock resolution used for the trace).
- timeouts: finite, > 0 and at most ``MAX_TIMEOUT_S`` (one week).
- positive integers (counts, repeats): 1..``MAX_COUNT`` unless a tighter bound is given.
"""

from __future__ import annotations

import errno
import math
import os
import stat
from pathlib import Path
from typing import Any

MAX_RANKS = 64
MIN_RATE = 1e-3
MAX_RATE = 1e6
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_COUNT = 1_000_000

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


def _number(option: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LimitError(f"{option} must be a number, got {value!r}")
    return float(value)


def check_int(option: str, value: Any, lo: int = 1, hi: int = MAX_COUNT) -> int:
    """An integer within ``lo..hi`` (floats with a fraction, bools and strings refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitError(f"{option} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise LimitError(f"{option} must be within {lo}..{hi:,}, got {value:,}")
    return value


def check_ranks(value: Any, option: str = "--ranks") -> int:
    """1..MAX_RANKS scheduler ranks (one process each; see the module docstring)."""
    return check_int(option, value, 1, MAX_RANKS)


def check_rate(value: Any, option: str = "--rates") -> float:
    """``inf`` or a finite rate within MIN_RATE..MAX_RATE requests/s."""
    v = _number(option, value)
    if v == math.inf:
        return v
    if not math.isfinite(v) or not MIN_RATE <= v <= MAX_RATE:
        raise LimitError(
            f"{option}: rate {value!r} is outside {MIN_RATE:g}..{MAX_RATE:g} requests/s "
            "(use inf for all requests at once)"
        )
    return v


def check_timeout(value: Any, option: str = "--timeout") -> float:
    """A finite timeout in seconds, > 0 and at most MAX_TIMEOUT_S."""
    v = _number(option, value)
    if not math.isfinite(v) or not 0 < v <= MAX_TIMEOUT_S:
        raise LimitError(
            f"{option} must be a number of seconds within (0, {MAX_TIMEOUT_S:g}], got {value!r}"
        )
    return v
