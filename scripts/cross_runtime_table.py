"""The cross-runtime table of issue 47 from committed micro reports: per runtime profile and
arm, the median total, its control-plane part (4 x 28x28 rounds through the same carrier;
the part of it spent carrying to the ranks), the time per stage group and the bytes the
copy ledger counts, for the same images.

    python scripts/cross_runtime_table.py reports/cross-runtime/h200

Reads ``<dir>/<name>/<run>/report.json[.gz]`` and the ``stages.csv`` beside it (the layout
scripts/h200-cross-runtime.sh writes) and prints a Markdown table; every figure is a field
of a report, none is computed here beyond sums of stage medians and byte counts.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kimi_bench.report.files import read_raw

GROUPS = {
    "producer": ("producer", "hash"),
    "to the ranks": ("d2h", "serialize", "to_rank0", "broadcast", "take_copy"),
    "on the ranks": ("pre_embed_move", "owner_h2d", "owner_materialize", "gather"),
}
MB = 1e6


def rows(folder: Path) -> list[str]:
    out = []
    for path in sorted(folder.glob("*/*/report.json*")):
        rep = read_raw(path)
        name = path.parent.parent.name
        payload = rep["control"]["payload"]
        with open(path.parent / "stages.csv", newline="") as fh:
            table = list(csv.DictReader(fh))
        for arm, doc in rep["arms"].items():
            stages = {r["stage"]: float(r["median_ms"]) for r in table if r["arm"] == arm}
            total = payload[arm]["total"]
            groups = " | ".join(
                f"{sum(stages.get(s, 0.0) for s in members):.1f}" for members in GROUPS.values()
            )
            ctl = payload[arm]["stages"]
            carried = sum(ctl[s]["control_ms"] for s in GROUPS["to the ranks"] if s in ctl)
            out.append(
                f"| {name} | {arm} | {total['arm_ms']:.1f} | {total['control_ms']:.1f} | "
                f"{carried:.1f} | "
                f"{groups} | {doc['copy_totals']['copied_bytes'] / MB:.1f} | "
                f"{doc['h2d_bytes'] / MB:.1f} |"
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    args = ap.parse_args()
    head = " | ".join(f"{g} ms" for g in GROUPS)
    print(
        "| profile | arm | total ms | control ms | control to the ranks ms | "
        f"{head} | copied MB | H2D MB |\n" + "|---" * 10 + "|"
    )
    print("\n".join(rows(args.folder)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
