#!/usr/bin/env python3
"""serve-ab against `transformers serve` (the tiny random LLaVA of tests/thirdparty), as a
committed report: the figures the README quotes for a real third-party server.

    KB_TRANSFORMERS_SERVE=VENV/bin/transformers python scripts/transformers-serve-report.py OUT

Starts the server (its own session, offline, an empty HF cache), runs
``kimi-bench serve-ab --endpoint tf=URL`` at rates 4 and inf (12 requests each, 8 output
tokens, one 64x48 JPEG per request, seed 0) into OUT, and stops the server. Exit code:
serve-ab's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kimi_bench.serving.launch import free_port, wait_healthy  # noqa: E402
from tests.thirdparty.test_transformers_serve import _make_model, _server_env  # noqa: E402


def main() -> int:
    if len(sys.argv) != 2 or not os.environ.get("KB_TRANSFORMERS_SERVE"):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    exe = Path(os.environ["KB_TRANSFORMERS_SERVE"])
    tmp = Path(tempfile.mkdtemp(prefix="kb-tfserve-"))
    env = _server_env(tmp)
    model, _ = _make_model(exe, tmp, env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
           "--device", "cpu"]  # fmt: skip
    with (tmp / "server.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    try:
        wait_healthy(url, 300.0, proc)
        ab = [sys.executable, "-m", "kimi_bench.cli.main", "serve-ab", "--endpoint", f"tf={url}",
              "--model", str(model), "--request-rate", "4,inf", "--num-prompts", "12",
              "--max-tokens", "8", "--image-resolution", "64x48", "--warmup-requests", "1",
              "--seed", "0", "--note", "transformers serve 5.23.0 (CPU), tiny random LLaVA "
              "of tests/thirdparty/tiny_llava.py", "--out", str(out)]  # fmt: skip
        return subprocess.run(ab, cwd=ROOT, check=False).returncode
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


if __name__ == "__main__":
    raise SystemExit(main())
