"""Every test module here sets ``pytestmark = pytest.mark.sglang``. Tests that need the
runtime take the ``rt`` fixture, which skips (the reason carries the install hint) where
sglang cannot be loaded. Build the environment with ``scripts/sglang-env.sh VENV_DIR``,
then run ``VENV_DIR/bin/python -m pytest -m sglang tests/sglang``."""

from __future__ import annotations

import pytest

from kimi_bench.sglang_ref import Runtime, SglangUnavailable, load_runtime


@pytest.fixture(scope="session")
def rt() -> Runtime:
    try:
        return load_runtime()
    except SglangUnavailable as exc:
        pytest.skip(f"sglang reference unavailable: {exc}")
