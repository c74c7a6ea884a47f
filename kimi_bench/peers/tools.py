"""GuideLLM and AIPerf result files (filled in below)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kimi_bench.peers.formats import PeerFormatError, PeerRun


def is_guidellm(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("benchmarks"), list)


def is_aiperf(obj: dict[str, Any]) -> bool:
    return "time_to_first_token" in obj or "input_config" in obj


def read_guidellm(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    raise PeerFormatError(f"{path}: GuideLLM reports are not supported yet")


def read_aiperf(objs: list[dict[str, Any]], path: Path) -> PeerRun:
    raise PeerFormatError(f"{path}: AIPerf exports are not supported yet")
