#!/usr/bin/env python3
"""How close a run's printed estimates came to its measured time, from its stderr.

    KIMI_BENCH_PROGRESS_S=5 kimi-bench run 2> run.err      # piped: a progress line every 5 s
    python scripts/estimate-check.py run.err [LABEL]

Reads the first estimate, every progress line (``..., 1:05 elapsed, about 2:10 left``) and
the ``done in`` line; prints the first estimate's error, the predicted end (elapsed + time
left) at a tenth, a quarter, half and three quarters of the run, how many progress lines
predicted the end within +-30%, and the largest gap between progress lines.
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

DONE = re.compile(r"done in ([\d:]+) \(estimate ([\d:]+)\)")
LINE = re.compile(r", ([\d:]+) elapsed, about ([\d:]+) left")


def seconds(text: str) -> int:
    total = 0
    for part in text.split(":"):
        total = total * 60 + int(part)
    return total


def check(text: str, label: str) -> list[str]:
    lines = text.splitlines()
    done = [line for line in lines if DONE.search(line)]
    if not done:
        return [f"## {label}", "no 'done in' line: the run did not finish"]
    m = DONE.search(done[-1])
    assert m is not None
    actual, first = seconds(m.group(1)), seconds(m.group(2))
    rows = [(seconds(a), seconds(a) + seconds(b)) for a, b in LINE.findall(text)]
    out = [f"## {label}", f"first line: {lines[0]}", f"last line: {done[-1]}",
           f"first estimate {first} s vs measured {actual} s: {pct(first, actual)}"]  # fmt: skip
    for frac in (0.1, 0.25, 0.5, 0.75):
        later = [(e, p) for e, p in rows if e >= frac * actual]
        if later:
            e, p = later[0]
            out.append(f"at {e} s elapsed ({e / actual:.0%} of the run): predicted end {p} s, "
                       f"{pct(p, actual)}")  # fmt: skip
    ok = [abs(p - actual) <= 0.3 * actual for _, p in rows]
    out.append(f"progress lines: {len(rows)}; predicted end within +-30%: {sum(ok)} of {len(ok)}")
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(rows)]
    out.append(f"largest gap between progress lines: {max(gaps, default=0)} s")
    return out


def pct(value: float, actual: float) -> str:
    return f"{(value - actual) / actual:+.0%}"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[0])
    print("\n".join(check(path.read_text(), argv[1] if len(argv) > 1 else str(path))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
