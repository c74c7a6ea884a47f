"""Write a copy of a micro report whose deferred arm is slower by a factor, rebuilt by the
real report builder so that its summary agrees with its raw data (the gate refuses a
report whose summary was edited alone). Used to check that a gate's rules catch a
regression of that size:

    python scripts/slow_report.py RUN/micro/report.json 0.2 OUT/slow-micro
    kimi-bench gate OUT/slow-micro --rules gate-h200 --baseline reports/baselines/h200

It runs anywhere: the copy keeps the original's environment (device, versions, commit) and
its control rounds.

Every deferred stage sample of every repeat is multiplied by 1 + FRACTION; eager and
zero-copy are left as measured. The report's notes say it is synthetic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from kimi_bench.bench.micro import build_report
from kimi_bench.domain.config import resolve_config
from kimi_bench.options import MicroOptions
from kimi_bench.report.emit import emit_micro
from kimi_bench.report.model import load_report


def slowed(path: Path, fraction: float) -> object:
    rep = load_report(path, "micro")
    fields = set(MicroOptions.model_fields)
    opts = MicroOptions.model_validate({k: v for k, v in rep.config.items() if k in fields})
    cfg = resolve_config(opts.preset, opts.config)
    samples = rep.data["repeats"]
    k = 1.0 + fraction
    for rec in samples["deferred"]:
        rec["stage_ms"] = {s: v * k for s, v in rec["stage_ms"].items()}
        rec["total_ms"] = sum(rec["stage_ms"].values())
    # built on this machine's CPU, then given the original's environment (device, versions,
    # commit, host load): the copy stands for a run on the machine that made the original
    profile = rep.config.get("defaults_profile", "cpu")
    floor = rep.data.get("floor") or {}
    control = rep.data.get("control_repeats") or {}  # the control rounds stay as measured
    new = build_report(opts, cfg, torch.device("cpu"), samples, floor, None, [], profile,
                       control=control)  # fmt: skip
    new.environment = rep.environment
    new.notes.insert(
        0,
        f"SYNTHETIC: the deferred arm of {path} with every stage sample x{k:g} "
        "(scripts/slow_report.py), to check that the gate catches such a regression.",
    )
    return new


def main() -> None:
    src, fraction, out = Path(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
    rep = slowed(src, fraction)
    out.mkdir(parents=True, exist_ok=True)
    emit_micro(rep, out)  # type: ignore[arg-type]
    print(f"{out / 'report.json'}: deferred x{1 + fraction:g}")


if __name__ == "__main__":
    main()
