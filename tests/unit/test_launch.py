"""``engine/launch.py`` and ``engine/start.py``: which launcher, which processes, which
GPU, and the messages."""

import pytest

from kimi_bench.engine.launch import (
    LaunchError,
    World,
    describe_mapping,
    detect_world,
    rank_gpu,
)
from kimi_bench.engine.procs import QUIET
from kimi_bench.engine.start import check_launch, explain_failure, plan, rendezvous
from kimi_bench.pipeline import arms, carrier

TORCHRUN = {
    "RANK": "5",
    "WORLD_SIZE": "8",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "4",
    "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "job7",
    "TORCHELASTIC_RESTART_COUNT": "0",
}


def test_auto_detects_torchrun_from_its_environment():
    assert detect_world("auto", {}) == World()
    w = detect_world("auto", TORCHRUN)
    assert (w.launcher, w.rank, w.size, w.local_rank, w.local_size) == ("torchrun", 5, 8, 1, 4)
    assert (w.node_rank, w.nodes, w.spans_nodes, w.writes_report) == (1, 2, True, False)
    assert w.ranks_per_node == 4
    assert detect_world("spawn", TORCHRUN) == World()  # asked for: kimi-bench starts all


def test_torchrun_without_its_environment_is_a_usage_error():
    with pytest.raises(LaunchError, match="RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR"):
        detect_world("torchrun", {})
    with pytest.raises(LaunchError, match="--launcher must be one of auto, spawn, torchrun"):
        detect_world("mpirun", {})
    with pytest.raises(LaunchError, match="not integers"):
        detect_world("torchrun", TORCHRUN | {"RANK": "x"})


def test_shm_is_refused_across_nodes_and_ranks_must_match():
    w = detect_world("auto", TORCHRUN)
    with pytest.raises(LaunchError, match="spans 2 nodes; use --transport pickle"):
        check_launch(w, None, carrier("shm"))
    with pytest.raises(LaunchError, match="--ranks 4 but torchrun started 8 ranks"):
        check_launch(w, 4, carrier("pickle"))
    assert check_launch(w, None, carrier("pickle")) == 8
    one_node = detect_world("auto", TORCHRUN | {"GROUP_WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "8"})
    assert check_launch(one_node, 8, carrier("shm")) == 8
    assert check_launch(World(), 3, carrier("shm")) == 3
    with pytest.raises(LaunchError, match=r"zero-copy arm .*\(--launcher spawn\)"):
        check_launch(one_node, None, carrier("shm"), tuple(arms(("eager", "zero-copy"))))


def test_plan_says_what_each_process_starts():
    spawn = plan(World(), 3)
    assert (spawn.children, spawn.in_process, spawn.hosts_producers) == ((0, 1, 2), None, True)
    rank0 = plan(World("torchrun", rank=0, size=4), 4)
    assert (rank0.children, rank0.in_process, rank0.hosts_producers) == ((0,), None, True)
    other = plan(World("torchrun", rank=3, size=4), 4)
    assert (other.children, other.in_process, other.hosts_producers) == ((), 3, False)


def test_rendezvous_key_is_unique_per_run_and_group():
    w = detect_world("auto", TORCHRUN)
    assert rendezvous(World(), "micro", "/tmp/x") == "/tmp/x"
    assert rendezvous(w, "serve/0/0/eager", "") == "env://kimibench/job7.0/serve/0/0/eager"


@pytest.mark.parametrize(
    ("device", "ranks", "gpus", "per_node", "mapping", "devices", "gather"),
    [
        ("cuda", 2, 2, 0, "one-to-one", ["cuda:0", "cuda:1"], "nccl"),
        ("cuda", 2, 1, 0, "round-robin", ["cuda:0", "cuda:0"], "metadata"),
        ("cuda", 3, 2, 0, "round-robin", ["cuda:0", "cuda:1", "cuda:0"], "metadata"),
        ("cuda", 4, 2, 2, "one-to-one", ["cuda:0", "cuda:1", "cuda:0", "cuda:1"], "nccl"),
        ("cuda", 1, 8, 0, "one-to-one", ["cuda:0"], "none"),
        ("cpu", 2, 0, 0, "cpu", ["cpu", "cpu"], "metadata"),
    ],
)
def test_mapping(device, ranks, gpus, per_node, mapping, devices, gather):
    d = describe_mapping(device, ranks, gpus, per_node)
    assert (d["mapping"], d["devices"], d["gather"]) == (mapping, devices, gather)
    if device == "cuda":
        assert [f"cuda:{rank_gpu(r, gpus, per_node)}" for r in range(ranks)] == devices
    text = {"one-to-one": "one GPU each", "round-robin": "round robin", "cpu": "on the CPU"}
    assert text[mapping] in d["text"]


def test_failure_messages_name_the_cause():
    gloo = "worker rank0 failed: RuntimeError: [gloo] Connection closed by peer [127.0.0.1]:1"
    w = World("torchrun", rank=0, size=4, node_rank=0, nodes=2)
    msg = explain_failure(w, gloo)
    assert msg.startswith("lost contact with another rank of the torchrun job (rank 0 on node 0")
    assert msg.endswith(f"({gloo})")
    stopped = explain_failure(w, "worker producer died with exit code -15", terminated=True)
    assert "torchrun stopped rank 0 on node 0 of 2 (SIGTERM) because another rank" in stopped
    assert explain_failure(World(), gloo + "\ntraceback") == gloo  # spawn: unchanged


def test_a_quiet_wait_under_torchrun_points_at_the_other_ranks():
    quiet = f"{QUIET} for 60 s"
    w = World("torchrun", rank=0, size=4, node_rank=0, nodes=2)
    msg = explain_failure(w, quiet)
    assert msg.startswith(f"{quiet} (rank 0 on node 0 of 2): its ranks wait in collectives")
    assert "another rank of the torchrun job" in msg
    alone = World("torchrun", rank=0, size=1)  # no other rank to wait on
    assert explain_failure(alone, quiet) == quiet
    assert explain_failure(World(), quiet) == quiet  # spawn: unchanged
