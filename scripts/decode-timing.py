"""How long each of the runtime's decoders takes per image, on this machine (issue 30's
"<= 3 ms per 1536x1024 baseline JPEG" for the owner's GPU decode):

    python scripts/decode-timing.py IMAGES_DIR OUT_DIR [--repeats 20] [--warmup 3]

For every file in IMAGES_DIR (``scripts/jpeg-corpus.py`` writes one) and every decoder
usable here (PIL always; nvimgcodec and nvjpeg on CUDA with their libraries), the time of
``DecoderChoice.decode`` (the runtime's ``load_image`` as kimi-bench runs it: PIL opens and
loads the bytes; a GPU decoder copies them to the device and decodes, timed until the
device is done), ``--warmup`` unmeasured then ``--repeats`` measured decodes one after
another in one process. Writes OUT_DIR/decode-timing.json (every sample, the environment
block of kimi-bench's reports) and OUT_DIR/decode-timing.md (median and p10-p90 per file
and decoder, and the medians by kind: baseline / progressive / other)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kimi_bench.domain.decoders import choose
from kimi_bench.domain.runtime import get_profile
from kimi_bench.infra.environment import environment, host_load

DECODERS = ("pil", "nvimgcodec", "nvjpeg")


def _time(choice: Any, data: bytes, device: torch.device, warmup: int, repeats: int) -> list[float]:
    samples = []
    for i in range(warmup + repeats):
        t0 = time.perf_counter()
        choice.decode(data, device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def _kind(name: str) -> str:
    for kind in ("baseline", "progressive"):
        if f"-{kind}-" in name:
            return kind
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("images", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    start = host_load()
    choices, why = {}, {}
    for name in DECODERS:
        c = choose(name, get_profile(None), device)
        why[name] = c.reason
        if c.chosen.name == name:
            choices[name] = c
    # the first decode in this process: the library loaded, its handles made
    first_ms = {name: c.warm(device) * 1e3 for name, c in choices.items()}
    rows = []
    for path in sorted(p for p in args.images.iterdir() if p.is_file()):
        data = path.read_bytes()
        for name, choice in choices.items():
            got = choice.decode(data, device)
            if got.decoder.name != name:  # refused (not a JPEG) or failed: not this decoder's time
                continue
            s = _time(choice, data, device, args.warmup, args.repeats)
            rows.append(
                {
                    "file": path.name,
                    "kind": _kind(path.name),
                    "decoder": name,
                    "median_ms": statistics.median(s),
                    "p10_ms": float(np.percentile(s, 10)),
                    "p90_ms": float(np.percentile(s, 90)),
                    "samples_ms": s,
                }
            )
        print(
            f"{path.name}: "
            + ", ".join(
                f"{r['decoder']} {r['median_ms']:.2f} ms" for r in rows if r["file"] == path.name
            ),
            flush=True,
        )
    env = environment(
        device,
        "kimi-k3",
        0,
        load_start=start,
        decoders={n: c.summary() for n, c in choices.items()},
        decoder_reasons=why,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {
        "kind": "decode-timing",
        "repeats": args.repeats,
        "warmup": args.warmup,
        "first_decode_ms": first_ms,
        "environment": env,
        "rows": rows,
    }
    (args.out / "decode-timing.json").write_text(json.dumps(doc, indent=1))
    (args.out / "decode-timing.md").write_text(_markdown(doc))
    return 0


def _markdown(doc: dict[str, Any]) -> str:
    env, rows = doc["environment"], doc["rows"]
    names = sorted({r["decoder"] for r in rows}, key=DECODERS.index)
    out = [
        "# Decode time per image",
        "",
        f"{env['device_name']}, torch {env['torch']}, CUDA {env['cuda']}; "
        f"commit {(env.get('git') or {}).get('commit')}; {doc['repeats']} measured decodes "
        f"after {doc['warmup']} unmeasured, one after another in one process; "
        f"1-minute load {env['host_load']['start']['load_1m']:.1f} at start, "
        f"{env['host_load']['end']['load_1m']:.1f} at end on {env['cpu_count']} CPUs.",
        "",
        "Decoders: " + "; ".join(f"{n} {env['decoders'][n]['version']}" for n in names),
        "",
        "First decode in the process (a 64x64 JPEG: the library loaded, handles made): "
        + "; ".join(f"{n} {doc['first_decode_ms'][n]:.0f} ms" for n in names),
        "",
        "## Median ms by kind (median of the files' medians)",
        "",
        "| kind | files | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for kind in ("baseline", "progressive", "other"):
        cells = []
        for n in names:
            m = [r["median_ms"] for r in rows if r["kind"] == kind and r["decoder"] == n]
            cells.append(f"{statistics.median(m):.2f} ({min(m):.2f}-{max(m):.2f})" if m else "-")
        count = len({r["file"] for r in rows if r["kind"] == kind})
        out.append(f"| {kind} | {count} | " + " | ".join(cells) + " |")
    out += [
        "",
        "## Per file: median (p10-p90) ms",
        "",
        "| file | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for f in sorted({r["file"] for r in rows}):
        by = {r["decoder"]: r for r in rows if r["file"] == f}
        cells = [
            f"{by[n]['median_ms']:.2f} ({by[n]['p10_ms']:.2f}-{by[n]['p90_ms']:.2f})"
            if n in by
            else "-"
            for n in names
        ]
        out.append(f"| {f} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
