"""Hold two micro report.json files against each other: the same key paths in the same
order everywhere, and the same values wherever a value is not a measurement (a time, a
statistic of times, a load average, a note or warning whose count follows the noise).
Usage: python compare.py OLD/report.json NEW/report.json"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MEASURED = ("_ms", "samples", "speedup", "interval", "median", "p10", "p25", "p75", "p90",
            "mean", "min", "max", "iqr", "noise", "warnings", "ratio", "unit_ids", "notes",
            "environment", "verdict", "prefix", "busy",
            "control_arm")  # fmt: skip
# the cheapest arm of the control rounds: an argmin over measured times
# lists whose length follows the noise (a note or warning per noisy stage): left out whole
NOISE_COUNTS = (".notes", ".warnings")
TYPED = ("timeline", "decisions", "control.floor", "control.rows")


def paths(o: Any, p: str = "") -> Iterator[tuple[str, Any]]:
    """(key path, value) of every leaf; a list gives its length, then its items."""
    if isinstance(o, dict):
        for k, v in o.items():
            yield from paths(v, f"{p}.{k}")
    elif isinstance(o, list):
        yield p + "[]", len(o)
        for v in o:
            yield from paths(v, p + "[]")
    else:
        yield p, o


def shape(report: dict[str, Any]) -> list[tuple[str, Any]]:
    out = []
    for p, v in paths(report):
        if any(n in p for n in NOISE_COUNTS):
            continue
        measured = any(m in p for m in MEASURED) or isinstance(v, float)
        out.append((p, type(v).__name__ if measured else v))
    return out


def main(old: str, new: str) -> int:
    a, b = (shape(json.loads(Path(f).read_text())) for f in (old, new))
    diff = [
        line
        for line in difflib.unified_diff([str(x) for x in a], [str(y) for y in b], lineterm="", n=0)
        if line[:1] in "+-" and line[:3] not in ("---", "+++")
    ]
    typed = sum(1 for x in b if any(t in x[0] for t in TYPED))
    print(f"leaves (notes and warnings left out): old {len(a)}, new {len(b)}; {typed} of "
          f"the new under {', '.join(TYPED)}; lines that differ: {len(diff)}")  # fmt: skip
    for line in diff[:20]:
        print("  " + line)
    return 0 if not diff else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
