"""Numbers in words for reports, tables and gate reasons: signed percentages, speedups
as "faster"/"slower" factors, milliseconds at a precision that fits their size.

Every function answers ``n/a`` for a missing or non-finite value, so a report with a
hole in it still renders.
"""

from __future__ import annotations

import math


def fmt_pct(x: float | None, digits: int = 1) -> str:
    """``+12.3%``; the sign is always shown; ``n/a`` for None, NaN and infinities."""
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.{digits}f}%"


def fmt_speedup(ratio: float | None, versus: str = "", digits: int = 2) -> str:
    """A time ratio ``base / arm`` in plain words: 1.23 -> ``1.23x faster``, 0.813 ->
    ``1.23x slower`` (never "0.81x faster"); with ``versus``: ``1.23x slower than eager``,
    ``as fast as eager (1.00x)`` when the factor rounds to 1."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return "n/a"
    factor = ratio if ratio >= 1 else 1.0 / ratio
    if round(factor, digits) == 1:
        return f"as fast as {versus} (1.{'0' * digits}x)" if versus else "as fast (1.00x)"
    word = "faster" if ratio > 1 else "slower"
    return f"{factor:.{digits}f}x {word}" + (f" than {versus}" if versus else "")


def fmt_speedup_range(low: float, high: float, digits: int = 2) -> str:
    """An interval of such ratios: ``1.10-1.35x faster``, ``1.10-1.35x slower`` (both ends
    below 1) or, when it spans 1, ``1.10x slower to 1.05x faster``."""
    if not (math.isfinite(low) and math.isfinite(high)) or min(low, high) <= 0:
        return "n/a"
    low, high = min(low, high), max(low, high)
    if low >= 1:
        return f"{low:.{digits}f}-{high:.{digits}f}x faster"
    if high <= 1:
        return f"{1 / high:.{digits}f}-{1 / low:.{digits}f}x slower"
    return f"{1 / low:.{digits}f}x slower to {high:.{digits}f}x faster"


def fmt_ms(x: float | None, significant: bool = False) -> str:
    """Milliseconds with a precision that fits the size. Tables: fixed decimals, ``123 ms``,
    ``12.3 ms``, ``1.23 ms``, ``0.0012 ms``. ``significant`` (figure labels, where space is
    short): three significant digits without trailing zeros, ``5 ms``, ``0.0123 ms``,
    ``212 ms``; a non-finite value is drawn as it is (``nan ms``), as figures always did."""
    if significant and x is not None:
        return f"{x:.3g} ms" if x < 100 else f"{x:.0f} ms"
    if x is None or not math.isfinite(x):
        return "n/a"
    digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 0.01 else 4
    return f"{x:.{digits}f} ms"
