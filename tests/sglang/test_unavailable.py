"""Clear errors when the reference runtime cannot be used (these run without sglang)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from kimi_bench.sglang_ref import SglangMissingError, SglangUnavailable, SglangVersionError
from kimi_bench.sglang_ref import runtime as R

pytestmark = pytest.mark.sglang


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget a runtime loaded by another test, for this test only."""
    monkeypatch.setattr(R, "_CACHE", [])


def test_missing_sglang_names_the_install_recipe(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "sglang" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(SglangMissingError) as info:
        R.load_runtime()
    msg = str(info.value)
    assert "sglang is not installed" in msg
    assert "scripts/sglang-env.sh" in msg
    assert "requirements-sglang.txt" in msg
    assert f"sglang=={R.TESTED_VERSION}" in msg


def test_missing_dependency_is_named(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda *a, **k: object())
    monkeypatch.setattr(R, "_torchvision_without_ops", lambda: None)

    def fail(module: str) -> Any:
        raise ModuleNotFoundError("No module named 'orjson'", name="orjson")

    monkeypatch.setattr(R.importlib, "import_module", fail)
    with pytest.raises(SglangMissingError) as info:
        R.load_runtime()
    assert "'orjson'" in str(info.value)
    assert "scripts/sglang-env.sh" in str(info.value)


def test_missing_function_names_function_and_version(
    fresh: None, rt: R.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    symbols = dict(R.SYMBOLS)
    symbols["gone"] = (R.K25, "navit_resize_config_v2")
    monkeypatch.setattr(R, "SYMBOLS", symbols)
    with pytest.raises(SglangVersionError) as info:
        R.load_runtime()
    msg = str(info.value)
    assert f"sglang {rt.version}" in msg
    assert f"{R.K25}.navit_resize_config_v2" in msg


@pytest.mark.slow  # imports every module in a fresh process
def test_importing_the_package_does_not_import_sglang() -> None:
    import subprocess
    import sys

    code = "import sys, kimi_bench.sglang_ref; print('sglang' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_failing_import_is_reported_not_raised(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda *a, **k: object())
    monkeypatch.setattr(R, "_torchvision_without_ops", lambda: None)

    def fail(module: str) -> Any:
        raise ImportError("cannot import name 'AutoImageProcessor' from 'transformers'")

    monkeypatch.setattr(R.importlib, "import_module", fail)
    with pytest.raises(SglangUnavailable) as info:
        R.load_runtime()
    msg = str(info.value)
    assert "ImportError: cannot import name 'AutoImageProcessor'" in msg
    assert R.K25 in msg and "scripts/sglang-env.sh" in msg
