"""Kill node 1 of a two-agent torchrun micro run on this machine, as
``tests/integration/test_torchrun.py`` does, many times, and print for each run how long
node 0 took to end after the kill and what rank 0's partial report says.

    python reports/checks/torchrun-node-death/drive.py --runs 20 --jitter 0.5
    python reports/checks/torchrun-node-death/drive.py --runs 3 --stop-agent

``--jitter S`` kills a random 0-S s after the 10th progress line. ``--stop-agent`` stops
node 0's torchrun agent (SIGSTOP) just before the kill, so it sends no SIGTERM and rank 0
has to notice the lost node by itself; the agent is continued once the report is written.
Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.integration import test_torchrun as t


def one(jitter: float, stop_agent: bool) -> str:
    out, tag = Path(tempfile.mkdtemp()), uuid.uuid4().hex
    procs = t._agents(out, "micro", 10000, tag)
    lines: queue.Queue[str] = queue.Queue()
    for p in procs:
        threading.Thread(target=t._lines, args=(p, lines), daemon=True).start()
    seen: list[str] = []
    try:
        while not any(s.startswith("progress 10/") for s in seen):
            seen.append(lines.get(timeout=180))
        time.sleep(random.random() * jitter)
        if stop_agent:
            os.kill(procs[0].pid, signal.SIGSTOP)
        killed = time.monotonic()
        t._kill(t._tagged(tag, node="1"))
        report = out / "micro" / "report.json"
        while not report.exists() and time.monotonic() - killed < 150:
            time.sleep(0.1)
        took = time.monotonic() - killed
        if stop_agent:
            os.kill(procs[0].pid, signal.SIGCONT)
        procs[0].wait(timeout=150)
        error = json.loads(report.read_text())["summary"]["error"] if report.exists() else None
    finally:
        t._kill([p.pid for p in procs if p.poll() is None] + t._tagged(tag))
    return f"report {took:.1f} s after the kill, agent 0 exit {procs[0].returncode}: {error}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--stop-agent", action="store_true")
    args = ap.parse_args()
    named = 0
    for i in range(args.runs):
        line = one(args.jitter, args.stop_agent)
        named += "another rank" in line
        print(f"run {i}: {line}", flush=True)
    print(f"{named} of {args.runs} reports name another rank")


if __name__ == "__main__":
    main()
