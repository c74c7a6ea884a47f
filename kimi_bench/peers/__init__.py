"""Peers' result files (sglang.bench_serving, vllm bench serve, GuideLLM, AIPerf) read
into ``serve-ab`` reports for ``gate`` and ``compare``: see ``formats`` (sglang, vLLM),
``guidellm``, ``aiperf``, ``figures`` (each tool's method and the checks) and ``report``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from kimi_bench.infra.limits import read_text_bounded
from kimi_bench.peers.aiperf import is_aiperf, read_aiperf
from kimi_bench.peers.base import MAX_BYTES, PeerFormatError, PeerRun, json_objects
from kimi_bench.peers.formats import read_sglang, read_vllm
from kimi_bench.peers.guidellm import is_guidellm, read_guidellm
from kimi_bench.peers.report import build_import_report, default_arm

FORMATS = ("auto", "sglang", "vllm", "guidellm", "aiperf")

__all__ = ["FORMATS", "PeerFormatError", "PeerRun", "build_import_report", "default_arm",
           "detect", "read_peer"]  # fmt: skip


def detect(obj: dict[str, Any]) -> str | None:
    """Which tool wrote this object (None: not a known format)."""
    if is_guidellm(obj):
        return "guidellm"
    if is_aiperf(obj):
        return "aiperf"
    if "model_id" in obj and "num_prompts" in obj:
        return "vllm"
    if "backend" in obj and ("server_info" in obj or "total_output_tokens_retokenized" in obj):
        return "sglang"
    return None


def read_peer(path: Path, fmt: str = "auto") -> PeerRun:
    """Read one result file (PeerFormatError naming the file and field when malformed)."""
    if fmt not in FORMATS:
        raise PeerFormatError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    try:
        text = read_text_bounded(path, MAX_BYTES, "result file")
    except (OSError, ValueError) as exc:  # missing, not a regular file, too large, not UTF-8
        raise PeerFormatError(f"cannot read {path}: {exc}") from None
    objs = json_objects(text, str(path))
    found = detect(objs[0])
    if fmt == "auto":
        if found is None:
            raise PeerFormatError(
                f"{path}: not a known result file (sglang.bench_serving --output-file, vllm "
                "bench serve --save-result, GuideLLM JSON report, AIPerf JSON export); "
                "give --format to read it as one"
            )
        fmt = found
    readers = {"sglang": read_sglang, "vllm": read_vllm, "guidellm": read_guidellm,
               "aiperf": read_aiperf}  # fmt: skip
    run = readers[fmt](objs, path)
    run.digest = hashlib.sha256(text.encode()).hexdigest()
    return run
