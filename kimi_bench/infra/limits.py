"""Bounded, non-blocking reads of the files a user hands in (reports, rules, configs).

``read_text_bounded`` opens with ``O_NONBLOCK`` and checks ``fstat`` on the opened
descriptor before reading, so a FIFO, a socket or a device (``/dev/zero``) is refused
instead of blocking or filling memory, and it reads at most ``limit`` bytes. (Numeric
option bounds live in ``kimi_bench.options``.)
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import signal
import stat
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Largest report, rules, scenario or config file read (reports hold raw samples: the
# H200 serve-ab baselines are ~0.5 MB).
MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024

# Pixel count above which an image is refused before it is decoded (a decompression bomb
# guard; parity --max-pixels and kimi-bench serve --max-pixels). 100 M pixels is ~7x the
# largest image a K3 plan keeps (7168 x 7168 side cap, 65536 patches); PIL's own guard
# warns at 89 M and refuses at 179 M.
DEFAULT_MAX_PIXELS = 100_000_000
# kimi-bench serve: the largest request body (base64 images make it; the OpenAI API
# allows 50 MB of images per request) and the pixels of one request's images together
# (default: this many times --max-pixels).
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
REQUEST_PIXELS_PER_IMAGE_LIMIT = 4


class LimitError(ValueError):
    """A value or a file outside the documented bounds; the message names it."""


# What ``stat`` calls each kind of file, in a reader's words (anything else: "special file").
_FILE_KINDS = (
    (stat.S_ISREG, "regular file"),
    (stat.S_ISDIR, "folder"),
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def file_kind(mode: int) -> str:
    """A reader's name for what a ``st_mode`` describes."""
    return next((name for is_kind, name in _FILE_KINDS if is_kind(mode)), "special file")


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


def gunzip_bounded(data: bytes, limit: int, what: str, path: str | Path) -> bytes:
    """``data`` gzip-decompressed, at most ``limit`` bytes of it (a small file that
    inflates without end is refused, never held whole); LimitError otherwise."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as f:
            out = f.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise LimitError(f"{what} {path} is not gzip-compressed data: {exc}") from None
    if len(out) > limit:
        raise LimitError(
            f"{what} {path} decompresses to more than {limit:,} bytes; not a kimi-bench {what}"
        )
    return out


def read_text_bounded(
    path: str | Path, limit: int, what: str = "file", *, gzipped: bool = False
) -> str:
    """UTF-8 text of a regular file of at most ``limit`` bytes (``gzipped``: the file is
    gzip-compressed, and its decompressed text is at most ``limit`` bytes too).

    Raises FileNotFoundError, LimitError (special file, too large, not UTF-8, not gzip)
    or another OSError (permission, I/O); callers turn them into their own error type."""
    data = read_bytes_bounded(path, limit, what)
    if gzipped:
        data = gunzip_bounded(data, limit, what, path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LimitError(f"{what} {path} is not UTF-8 text: {exc}") from None


def describe_os_error(exc: OSError) -> str:
    """``[Errno 13] Permission denied`` -> ``permission denied``."""
    text = exc.strerror or errno.errorcode.get(exc.errno or 0, "") or str(exc)
    return text[:1].lower() + text[1:]


def read_text_or(
    error: type[Exception], path: str | Path, limit: int, what: str, *, gzipped: bool = False
) -> str:
    """:func:`read_text_bounded` with every failure turned into ``error`` naming ``what``
    and the path (missing, special or oversized file, not UTF-8, permission, I/O)."""
    try:
        return read_text_bounded(path, limit, what, gzipped=gzipped)
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except LimitError as exc:
        raise error(str(exc)) from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {describe_os_error(exc)}") from None


# Numeric option bounds of ``kimi-bench project`` (a projection, so wider than what one host
# runs, but finite: the binomial-tree model walks every rank of every round).
MAX_PROJECT_RANKS = 16_384
MAX_GPUS_PER_NODE = 1_024
MAX_HOST_CORES = 16_384
MAX_LINK_GBPS = 1e6  # Gbit/s
MAX_THREAD_EXPONENT = 4.0
MAX_LOOPBACK_STREAMS = 1_024.0


# What stopped a run, named in its report. kimi-bench turns SIGTERM (what CI runners and
# ``timeout`` send) into ``KeyboardInterrupt("SIGTERM")`` so it takes Ctrl-C's clean-up path.
INTERRUPTED_PREFIX = "interrupted by "
SIGINT_REASON = "interrupted by SIGINT (Ctrl-C)"
SIGTERM_REASON = "interrupted by SIGTERM (a CI timeout, `timeout` or kill)"


def interrupt_reason(exc: BaseException | None = None) -> str:
    """The report's words for the KeyboardInterrupt ``exc``: SIGTERM or SIGINT (Ctrl-C)."""
    arg = exc.args[0] if exc is not None and exc.args else None
    if isinstance(arg, str) and arg.startswith(INTERRUPTED_PREFIX):
        return arg  # already named (re-raised with the reason)
    return SIGTERM_REASON if arg == "SIGTERM" else SIGINT_REASON


def is_interrupt(error: object) -> bool:
    """Whether a recorded error says the run was interrupted by a signal."""
    return isinstance(error, str) and error.startswith(INTERRUPTED_PREFIX)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs (main thread only), SIGTERM raises ``KeyboardInterrupt("SIGTERM")``
    so that it takes Ctrl-C's path and :func:`interrupt_reason` names it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
