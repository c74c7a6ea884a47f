"""Two torchrun agents on this machine acting as two nodes (``--nnodes 2``, node ranks 0
and 1, loopback rendezvous on a free port, ``--nproc-per-node 2``): 4 ranks on the CPU with
the pickle carrier. A healthy run (micro and serve-ab, both arms, bit-exact, clean exit),
and a node that dies mid-run (every process of agent 1 killed at once): agent 0 exits
non-zero with a clear message and a partial report, and nothing of the run is left.

Every process of a run carries ``KIMI_BENCH_TEST_RUN`` (and ``KIMI_BENCH_TEST_NODE``) in
its environment (torchrun and multiprocessing pass it on), which is how the test finds them.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ENTRY = Path(__file__).with_name("torchrun_entry.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _agents(out: Path, parts: str, repeats: int, tag: str) -> list[subprocess.Popen[str]]:
    port = _free_port()
    procs = []
    for node in (0, 1):
        env = os.environ | {
            "PYTHONPATH": str(REPO),
            "KIMI_BENCH_TEST_RUN": tag,
            "KIMI_BENCH_TEST_NODE": str(node),
        }
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank",
            str(node), "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
            str(port), "--max-restarts", "0", str(ENTRY), str(out), parts, str(repeats),
        ]  # fmt: skip
        procs.append(
            subprocess.Popen(
                cmd,
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        )
    return procs


def _tagged(tag: str, node: str | None = None) -> list[int]:
    """Live processes whose environment carries the run's tag (and node)."""
    want = [f"KIMI_BENCH_TEST_RUN={tag}".encode()]
    if node is not None:
        want.append(f"KIMI_BENCH_TEST_NODE={node}".encode())
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and all(w in env for w in want):
            pids.append(int(d.name))
    return pids


def _none_left(tag: str, wait_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + wait_s
    while (left := _tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_two_nodes_loopback_both_arms_bit_exact(tmp_path):
    tag = uuid.uuid4().hex
    procs = _agents(tmp_path, "micro,serve", 2, tag)
    try:
        outputs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        _kill([p.pid for p in procs if p.poll() is None] + _tagged(tag))
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)
    micro = json.loads((tmp_path / "micro" / "report.json").read_text())
    assert micro["config"]["ranks"] == 4
    assert micro["summary"]["bit_exact_all_repeats"] is True
    # two launches (torchrun_entry), each a fresh rendezvous of every rank, 2 repeats each
    assert micro["summary"]["repeats_completed"] == 4
    assert micro["summary"]["launches_completed"] == 2
    assert [r["launch"] for r in micro["repeats"]["deferred"]] == [0, 0, 1, 1]
    assert any("torchrun: 4 ranks on 2 node(s), 2 per node" in n for n in micro["notes"])
    launch = micro["config"]["launch"]
    assert (launch["launcher"], launch["nodes"], launch["ranks_per_node"]) == ("torchrun", 2, 2)
    assert launch["rank_mapping"]["mapping"] == "cpu"
    for arm in ("eager", "deferred"):  # every rank's ledger arrived, with the gather stage
        gather = [c for c in micro["arms"][arm]["copies"] if c["stage"] == "gather"]
        assert [(c["op"], c["count"]) for c in gather] == [("gather_metadata", 4)]
    serve = json.loads((tmp_path / "serve" / "report.json").read_text())
    assert serve["summary"]["failed_requests"] == 0
    done = {r["arm"]: r["completed"] for r in serve["results"]}
    assert done == {"eager": 6, "deferred": 6}
    assert sum(1 for r in serve["requests"] if r.get("ttft_ms") is not None) == 12
    assert _none_left(tag) == []


def _lines(proc: subprocess.Popen[str], sink: queue.Queue[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        sink.put(line)


def _alive(tag: str) -> str:
    """What still runs of the run, a line each (pid, state, command), for a failure text."""
    rows = []
    for pid in _tagged(tag):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:160]
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            rows.append(f"  {pid} {state} {cmd.decode(errors='replace')}")
    return "\n".join(rows) or "  (none)"


def test_a_node_that_dies_ends_the_run_with_a_partial_report(tmp_path):
    tag = uuid.uuid4().hex
    procs = _agents(tmp_path, "micro", 10000, tag)
    lines: queue.Queue[str] = queue.Queue()
    other: queue.Queue[str] = queue.Queue()  # node 1's output, read so it never blocks on it
    threading.Thread(target=_lines, args=(procs[0], lines), daemon=True).start()
    threading.Thread(target=_lines, args=(procs[1], other), daemon=True).start()
    seen: list[str] = []
    left = ""
    try:
        deadline = time.monotonic() + 180
        # 10 (round, arm) steps: past the warm-up repeat, the unmeasured control round and at
        # least one measured repeat of both arms (control rounds are spread over the repeats)
        while time.monotonic() < deadline and not any(s.startswith("progress 10/") for s in seen):
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                assert procs[0].poll() is None, "".join(seen)
        assert any(s.startswith("progress 10/") for s in seen), "".join(seen)
        killed = time.monotonic()
        _kill(_tagged(tag, node="1"))  # node 1 dies: every process on it at once
        try:  # rank 0's quiet limit is 60 s, and its agent gives a rank 30 s after SIGTERM
            code = procs[0].wait(timeout=150)
        except subprocess.TimeoutExpired:
            left, code = _alive(tag), None
        ended = time.monotonic() - killed
    finally:
        _kill([p.pid for p in procs if p.poll() is None] + _tagged(tag))
    time.sleep(0.5)
    while not lines.empty():
        seen.append(lines.get())
    node1 = "".join(list(other.queue)[-20:])
    text = "".join(seen) + f"\n[node 0 ended {ended:.1f} s after the kill]\n{left}\n{node1}"
    assert code not in (0, None), text
    assert "error:" in text and "another rank" in text, text
    report = json.loads((tmp_path / "micro" / "report.json").read_text())
    summary = report["summary"]
    assert summary["verdict"].startswith("INCOMPLETE")
    assert "another rank" in summary["error"], text
    assert summary["repeats_completed"] >= 1  # what was measured before the node died
    assert _none_left(tag) == []
