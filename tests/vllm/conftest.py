"""Every test module here sets ``pytestmark = pytest.mark.vllm``. Tests that need vLLM take
the ``ref`` fixture, which skips (the reason carries the install hint) where vLLM's K3
image path cannot be loaded. Build the environment with ``scripts/vllm-env.sh VENV_DIR``,
then run ``VENV_DIR/bin/python -m pytest -m vllm tests/vllm``."""

from __future__ import annotations

import pytest

from kimi_bench.vllm_ref import Reference, VllmMissingError, VllmVersionError, load


@pytest.fixture(scope="session")
def ref() -> Reference:
    try:
        return load()
    except (VllmMissingError, VllmVersionError) as exc:
        pytest.skip(f"vLLM reference unavailable: {exc}")
