"""How long a command will take, from its resolved options: printed before a run starts
and used for the ETA while it runs (``cli.progress``).

The constants were measured on the 2-core CPU machine this project is developed on, by
running each command several times and comparing the estimate printed at the start with
the "done in" line at the end (see CALIBRATION below: which runs, and the host load then).
On a GPU the work per step is smaller; the start-up (imports, processes, rendezvous) is
about the same, so the same model is used with the GPU constants as a rough guide.
"""

from __future__ import annotations

import math
from typing import Any

from kimi_bench.options import resolve_defaults

# CALIBRATION (seconds) -- 2-core CPU, `kimi-bench run` (the default scenario) at commit
# 060aed8 and later, its parts' measured times: in the fresh-clone CI at a 1-minute load of
# 3.2 (parity 12 s, micro 15 s, serve-ab 16 s, gate and index 1 s) and on this machine at a
# load of 7.9 falling to 5.8 (22, 18, 18 and 1 s); divided by ``contention`` at the CI's
# load, they give the quiet host's scale below. The constants before (fitted at loads
# 7.6-17 before micro ran in launches, and before parity shared its workers) printed 2:09
# for a 0:45 CI run and 3:06 for a 0:58 one. The micro constants keep their proportions
# (fitted on 2x640x480 and 4x1536x1024) at a third of their old scale. In-sample on those
# two runs; the out-of-sample check is reports/timings/estimates-*.txt.
CPU = {
    "import_s": 3.0,  # python + torch import, option checks (every command)
    "proc_s": 0.28,  # one extra process (forked from the forkserver, joins gloo)
    "parity_builtin_s": 7.5,  # both arms over the 27-input built-in corpus, 2 ranks
    "parity_input_s": 0.35,  # per input of a folder (decode, both arms, PIL reference)
    "parity_mpix_s": 0.9,  # per megapixel of a folder's inputs
    "micro_step_s": 0.0045,  # one arm of one repeat: barriers, gathers, queue
    "micro_mpix_s": 0.026,  # per (megapixels ** 1.5) per arm and repeat: large images cost
    # more per pixel (cache); fitted on 2x640x480 (run) and 4x1536x1024 (micro's default)
    "floor_mpix_s": 0.38,  # the floor's rounds, per megapixel
    "report_s": 2.0,  # report.json/md/html + figures (matplotlib) per report
    "serve_arm_s": 0.5,  # one emulator server: start, warm-up, stop
    "serve_request_s": 0.05,  # per request, fixed part (HTTP, batching, stand-ins)
    "serve_mpix_s": 0.25,  # per request and megapixel (decode, arm work)
    "gate_s": 1.0,  # run: gate, JUnit, index.md and the self-contained index.html
}
# On a GPU the per-pixel work is far smaller; start-up and reports are not.
CUDA = CPU | {"parity_mpix_s": 0.1, "micro_mpix_s": 0.004, "floor_mpix_s": 0.01,
              "serve_mpix_s": 0.02, "parity_builtin_s": 6.0}  # fmt: skip


CONTENTION_EXPONENT = 0.5


def contention(procs: int) -> float:
    """How much slower than on a quiet host, from the 1-minute load average at the start:
    ``(load / cpus) ** CONTENTION_EXPONENT`` once the load exceeds the CPUs, 1.0 below.
    0.75 (fitted on loads 15-23 on 2 CPUs) printed estimates 2.0-2.2x the measured time of
    ``kimi-bench run`` at loads 7.6 and 17 (issue 46); 0.4 put both within +26% and +3%
    with that time's constants; 0.5 with today's (the CPU-bound parts slowed by 1.2-1.8x
    from a load of 3.2 to one of 7.9: ``reports/timings/estimates-*.txt``). A rough guide:
    the load of other jobs changes while a run goes on, which is why the time left printed
    during a run is recalibrated from the parts it measured (``cli.progress``). ``procs``:
    our busy processes (unused by the fit, kept for the note)."""
    import os

    try:
        load, cpus = os.getloadavg()[0], len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 1.0
    del procs
    return max(1.0, load / cpus) ** CONTENTION_EXPONENT


def busy_note(procs: int) -> str:
    """`` (host busy: load 12.3 on 2 CPUs, x6.2)`` when the estimate is scaled, else ""."""
    import os

    f = contention(procs)
    if f < 1.2:
        return ""
    load, cpus = os.getloadavg()[0], len(os.sched_getaffinity(0))
    return f" (host busy: load {load:.1f} on {cpus} CPUs, x{f:.1f} a quiet host's time)"


def _k(device_type: str) -> dict[str, float]:
    return CUDA if device_type == "cuda" else CPU


def parity_s(opts: Any, device_type: str = "cpu") -> float:
    """Built-in corpus: a measured constant; a folder: per input and per megapixel (the
    headers are not read here: the folder's size stands in, about 3 bytes a pixel)."""
    k = _k(device_type)
    busy = contention(2)  # the process and its thread pool
    if opts.images is None:
        return (k["import_s"] + k["parity_builtin_s"] + k["report_s"]) * busy
    files = [p for p in opts.images.iterdir() if p.is_file()] if opts.images.is_dir() else []
    mpix = sum(p.stat().st_size for p in files) / 3e6
    return (
        k["import_s"] + len(files) * k["parity_input_s"] + mpix * k["parity_mpix_s"] + k["report_s"]
    )


def micro_s(opts: Any, device_type: str = "cpu") -> float:
    """Per launch: start-up of ranks + 1 processes, the floor, every arm ``warmup +
    repeats`` times and in the control rounds; then the report. ``opts`` has its machine
    defaults resolved."""
    k = _k(device_type)
    mpix = sum(c * w * h for c, w, h in opts.groups) / 1e6 if not opts.images else 1.0
    control = opts.control_repeats + (1 if opts.control_repeats and opts.warmup else 0)
    steps = (opts.warmup + opts.repeats) * len(opts.arms)
    launch = (  # every launch starts its processes, measures its floor, runs its rounds
        (opts.ranks + 1) * k["proc_s"]
        + mpix * k["floor_mpix_s"]
        + steps * (k["micro_step_s"] + mpix**1.5 * k["micro_mpix_s"])
        + control * len(opts.arms) * k["micro_step_s"]  # control rounds: no pixels to speak of
    )
    quiet = k["import_s"] + getattr(opts, "launches", 1) * launch + k["report_s"]
    return quiet * contention(opts.ranks + 1)


def serve_s(opts: Any, device_type: str = "cpu") -> float:
    """One server per arm (start-up with its ranks and producers); per rate, repeat and
    arm the longer of the arrival span and the time to serve the requests; the report.
    ``opts`` has its machine defaults resolved."""
    k = _k(device_type)
    w, h = opts.width_height
    mpix = w * h * opts.images_per_request / 1e6
    per_request = k["serve_request_s"] + mpix * k["serve_mpix_s"]
    arms = len(opts.endpoints) or len(opts.arms)
    procs = (opts.ranks or 1) + opts.processor_workers
    total = k["import_s"] + k["report_s"] + arms * (k["serve_arm_s"] + procs * k["proc_s"])
    n = opts.requests or 1
    for rate in opts.rates:
        span = 0.0 if math.isinf(rate) else n / rate
        one = max(span, n * per_request) + opts.warmup_requests * per_request
        total += one * opts.repeats * arms
    return total * contention(procs)


def run_parts(sc: Any, device_type: str = "cpu") -> list[tuple[str, float]]:
    """``kimi-bench run``: (part, seconds) in the order the parts run."""
    k, busy = _k(device_type), contention(2)
    parts: list[tuple[str, float]] = []
    if sc.parity is not None:
        parts.append(("parity", parity_s(sc.parity, device_type) - k["import_s"] * busy))
    if sc.micro is not None:
        m, _ = resolve_defaults(sc.micro, "micro", device_type)
        parts.append(("micro", micro_s(m, device_type) - k["import_s"] * busy))
    if sc.serve_ab is not None:
        s, _ = resolve_defaults(sc.serve_ab, "serve_ab", device_type)
        parts.append(("serve-ab", serve_s(s, device_type) - k["import_s"] * busy))
    parts.append(("gate and index", k["gate_s"] * busy))
    return parts
