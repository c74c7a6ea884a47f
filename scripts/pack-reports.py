"""Store the checkout's large committed reports gzip-compressed: every ``report.json``
under ``reports/`` (local runs under ``reports/runs/`` excepted) larger than
``--min-bytes`` becomes ``report.json.gz`` beside it, byte-for-byte the same JSON once
decompressed (checked before the plain file is removed). kimi-bench reads either name
(``kimi_bench/report/files.py``), so every command takes the folder as before.

Run it from the repository root before committing new baselines or checks:

    python scripts/pack-reports.py            # packs; prints what it did
    python scripts/pack-reports.py --check    # exit 1 if a report would be packed (CI)

The output is reproducible (no file name or time in the gzip header), so packing the same
report again gives the same bytes and git sees no change.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# reports larger than this are packed: the small ones (parity, the CPU example run) stay
# readable as text; the raw samples of micro and serve-ab runs are what weighs
MIN_BYTES = 200_000


def packed(data: bytes) -> bytes:
    """``data`` gzip-compressed, the same bytes on every run (mtime 0, no name)."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def to_pack(root: Path, min_bytes: int) -> list[Path]:
    runs = root / "runs"
    return sorted(
        p
        for p in root.rglob("report.json")
        if not p.is_relative_to(runs) and p.is_file() and p.stat().st_size > min_bytes
    )


def pack(path: Path) -> tuple[int, int]:
    """Write ``path``'s ``.gz`` sibling, check it, remove ``path``; (size before, after)."""
    data = path.read_bytes()
    blob = packed(data)
    if gzip.decompress(blob) != data:
        raise SystemExit(f"{path}: the compressed copy does not decompress to the same bytes")
    target = path.with_name(path.name + ".gz")
    target.write_bytes(blob)
    path.unlink()
    return len(data), len(blob)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=REPO / "reports")
    ap.add_argument("--min-bytes", type=int, default=MIN_BYTES)
    ap.add_argument("--check", action="store_true", help="list what would be packed; exit 1")
    args = ap.parse_args(argv)
    todo = to_pack(args.root, args.min_bytes)
    if args.check:
        for p in todo:
            print(f"{p}: over {args.min_bytes:,} bytes, not packed (run scripts/pack-reports.py)")
        return 1 if todo else 0
    before = after = 0
    for p in todo:
        b, a = pack(p)
        before, after = before + b, after + a
        print(f"{p}: {b:,} -> {a:,} bytes")
    print(f"packed {len(todo)} reports: {before:,} -> {after:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
