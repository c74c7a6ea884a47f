"""Host probe behind the projection's default thread_exponent (0.65).

Copies 76.6 MB (the K3 FP32 payload of 4 x 1536x1024) into a fresh POSIX shared-memory
segment (what micro's shm serialize does) and clones it back out (take_copy), with 1, 2,
3, 5, 8 and 16 torch threads; median of 5 after 2 warm-ups. Run on one nvidia-h200 machine
(16 cores) on 2026-11-30 with `python3 copy_threads_probe.py`; output in output.txt.
"""

import mmap
import os
import statistics as S
import subprocess
import time
import uuid

import torch

print(
    "cpu_count", os.cpu_count(), "aff", len(os.sched_getaffinity(0)), "thr", torch.get_num_threads()
)
print(
    subprocess.run(
        "cat /sys/fs/cgroup/cpu.max; lscpu|egrep 'Model name|^CPU\\(s\\)|Socket|NUMA node\\(s\\)'",
        shell=True,
        capture_output=True,
        text=True,
    ).stdout
)
N = 76581120
src = torch.randint(0, 255, (N,), dtype=torch.uint8)


def one() -> tuple[float, float]:
    nm = f"/dev/shm/probe_{uuid.uuid4().hex}"
    fd = os.open(nm, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.ftruncate(fd, N)
    mm = mmap.mmap(fd, N)
    os.close(fd)
    t0 = time.perf_counter()
    d = torch.frombuffer(mm, dtype=torch.uint8, count=N)
    d.copy_(src)
    t = time.perf_counter() - t0
    t1 = time.perf_counter()
    o = d.clone()
    tc = time.perf_counter() - t1
    del d, o
    mm.close()
    os.unlink(nm)
    return t * 1e3, tc * 1e3


for T in (1, 2, 3, 5, 8, 16):
    torch.set_num_threads(T)
    xs = [one() for _ in range(7)][2:]
    copy_in, clone = S.median(x[0] for x in xs), S.median(x[1] for x in xs)
    print("T", T, f"copyin {copy_in:.1f} clone {clone:.1f}")
