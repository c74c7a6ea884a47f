"""Host probe behind the projection's copy scaling (``kimi-bench project --host-probe``).

micro gives every process ``cores // (ranks + 1)`` torch threads. Two kinds of host copy
live in its stages: the producer copies alone while the ranks wait (``hwc_to_chw`` in the
producer stage and in shm's serialize, ``shm_copy_in``), and the ranks copy at the same time
(``clone`` out of shared memory in take_copy). This probe measures each op the way micro
runs it at 2, 4 and 8 ranks on this host:

- ``alone``: one process with ``cores // (ranks + 1)`` threads (the producer's copies);
- ``together``: ``ranks`` processes at once, each with that many threads, started on a
  barrier; the stage ends with the slowest (the ranks' copies).

Sizes are micro's PR shape, 4 x 1536x1024: uint8 HWC 18.9 MB for hwc_to_chw (one image
at a time, as the producer stages them); K3 FP32 76.6 MB and raw 18.9 MB for shm_copy_in
and clone. Median of 7 after 2 warm-ups. Output: JSON on stdout
(``{"cores": C, "ops": {op: {bytes: {"alone": {ranks: ms}, "together": {ranks: ms}}}}}``).
"""

import json
import mmap
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid

import torch

K3_FP32 = 76_581_120  # K3 FP32 features of the 4 images (eager)
RAW = 18_874_368  # their raw uint8 (deferred)
HWC = (4, 1024, 1536, 3)
RANKS = (2, 4, 8)  # micro's validation shapes; 8 per node is also the projection's


def _shm(n):
    name = f"/dev/shm/kbprobe_{uuid.uuid4().hex}"
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, n)
    mm = mmap.mmap(fd, n)
    os.close(fd)
    return name, mm


def one(op, src):
    if op == "hwc_to_chw":  # per image, as the producer stages them (steps.py)
        t0 = time.perf_counter()
        for img in src:
            img.permute(2, 0, 1).contiguous()
        return (time.perf_counter() - t0) * 1e3
    n = src.numel()
    name, mm = _shm(n)
    try:
        dst = torch.frombuffer(mm, dtype=torch.uint8, count=n)
        t0 = time.perf_counter()
        if op == "shm_copy_in":  # a fresh segment every time, as the carrier does
            dst.copy_(src)
            return (time.perf_counter() - t0) * 1e3
        dst.copy_(src)
        t0 = time.perf_counter()
        dst.clone()
        return (time.perf_counter() - t0) * 1e3
    finally:
        del dst
        mm.close()
        os.unlink(name)


def source(op, size):
    if op == "hwc_to_chw":
        return list(torch.randint(0, 255, HWC, dtype=torch.uint8).unbind(0))
    return torch.randint(0, 255, (size,), dtype=torch.uint8)


def worker(op, size, threads, barrier, rounds, out):
    torch.set_num_threads(threads)
    src = source(op, size)
    times = []
    for _ in range(rounds):
        barrier.wait()
        times.append(one(op, src))
    out.put(times)


def together(op, size, procs, threads, rounds=9):
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    args = (op, size, threads, barrier, rounds, out)
    ps = [ctx.Process(target=worker, args=args) for _ in range(procs)]
    for p in ps:
        p.start()
    per_proc = [out.get() for _ in ps]
    for p in ps:
        p.join()
    slowest = [max(r[i] for r in per_proc) for i in range(rounds)][2:]
    return statistics.median(slowest)


def main():
    cores = len(os.sched_getaffinity(0))
    res = {"cores": cores, "torch": torch.__version__, "ops": {}}
    for op, size in (
        ("hwc_to_chw", RAW),
        ("shm_copy_in", RAW),
        ("shm_copy_in", K3_FP32),
        ("clone", RAW),
        ("clone", K3_FP32),
    ):
        alone, tog = {}, {}
        for ranks in RANKS:
            threads = max(1, cores // (ranks + 1))
            alone[ranks] = together(op, size, 1, threads)
            tog[ranks] = together(op, size, ranks, threads)
            print(op, size, ranks, threads, f"{alone[ranks]:.2f} {tog[ranks]:.2f}", file=sys.stderr)
        res["ops"].setdefault(op, {})[str(size)] = {"alone": alone, "together": tog}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
