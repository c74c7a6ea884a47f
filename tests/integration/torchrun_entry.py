"""What ``tests/integration/test_torchrun.py`` starts on every node with torchrun: a small
``micro`` and/or ``serve-ab`` run (CPU, pickle carrier) through ``bench/launch_runs.py``,
as the CLI does when it is launched by torchrun. Rank 0 writes the reports under OUT and
prints ``progress D/T`` lines; a failure prints ``error: ...`` and exits 1.

Usage: torchrun ... torchrun_entry.py OUT micro[,serve] [MICRO_REPEATS]
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from kimi_bench.bench.launch_runs import launch_notes, run_micro_on, run_serve_on
    from kimi_bench.bench.micro import MicroFailed
    from kimi_bench.bench.serve import ServeFailed
    from kimi_bench.bench.serve_build import build_serve_report
    from kimi_bench.engine.launch import detect_world
    from kimi_bench.engine.start import RankFailed, for_world
    from kimi_bench.infra.environment import resolve_device
    from kimi_bench.options import MicroOptions, ServeOptions, resolve_defaults
    from kimi_bench.report.emit import emit_micro, emit_serve

    out, parts = Path(argv[0]), argv[1].split(",")
    repeats = int(argv[2]) if len(argv) > 2 else 2
    world = detect_world("torchrun")
    status = 0
    try:
        if "micro" in parts:
            opts = MicroOptions(
                synthetic="2x64x48,1x30x20", transport="pickle", device="cpu",
                repeats=repeats, warmup=1, timeout_s=60, launches=2,
            )  # fmt: skip
            try:
                report = run_micro_on(
                    world, opts, lambda d, t: print(f"progress {d}/{t}", flush=True)
                )
            except MicroFailed as exc:
                report, status = exc.report, 1
                print(f"error: {exc}", file=sys.stderr, flush=True)
            if report is not None:
                emit_micro(report, out / "micro")
        if "serve" in parts and status == 0:
            sopts = ServeOptions(
                rates="inf", requests=6, resolution=(64, 48), processor_workers=1,  # type: ignore[arg-type]
                transport="pickle", device="cpu", warmup_requests=1, unique_images=2,
                request_timeout_s=30, notes=tuple(launch_notes(world, world.size, "cpu", "pickle")),
            )  # fmt: skip
            error = None
            try:
                runs = run_serve_on(world, sopts)
            except ServeFailed as exc:
                runs, error, status = exc.runs, str(exc), 1
            if world.writes_report:
                shown, profile = resolve_defaults(for_world(sopts, world), "serve_ab", "cpu")
                rep = build_serve_report(shown, runs, resolve_device("cpu"), error, profile)
                emit_serve(rep, out / "serve")
    except RankFailed as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
