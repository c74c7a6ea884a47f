"""The main process of a run that is about to be SIGKILLed (run as a subprocess by
test_processes.py): starts two idle workers, prints what it made, then waits."""

from __future__ import annotations

import json
import sys
import time

from kimi_bench.engine.procs import Harness
from kimi_bench.pipeline.transport import new_prefix
from tests.bad_inputs import workers
from tests.conftest import DELIBERATE_ORPHAN


def main() -> None:
    # segments left on purpose: other tests running meanwhile do not count them as theirs
    harness = Harness(prefix=new_prefix() + DELIBERATE_ORPHAN.lstrip("_"))
    harness.start("rank0", workers.idle, harness.prefix, "rank0")
    harness.start("producer", workers.idle, harness.prefix, "producer")
    pids = []
    for kind, payload in harness.messages(timeout_s=60):
        if kind == "ready":
            pids.append(payload)
        if len(pids) == 2:
            break
    info = {"workers": pids, "prefix": harness.prefix, "tmpdir": str(harness.tmpdir)}
    sys.stdout.write(json.dumps(info) + "\n")
    sys.stdout.flush()
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
