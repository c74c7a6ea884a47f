"""The built wheel holds the whole package: every module and data file under kimi_bench/,
the built-in scenarios and the JSON schemas (issue 19: a hand-written package list once
left kimi_bench.pipeline out, and parity/micro/serve-ab failed when installed)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.install.wheel import build_wheel, copy_sources, expected_files, missing_from_wheel

pytestmark = pytest.mark.slow  # a wheel build: a few seconds each


def test_the_wheel_holds_every_module_and_data_file_of_the_source_tree(tmp_path: Path) -> None:
    src = copy_sources(tmp_path / "src")
    wheel = build_wheel(src, tmp_path / "dist")
    expected = expected_files(src)
    # the listing is the real tree: the parts that were once missing or are data are in it
    for must in (
        "kimi_bench/pipeline/steps.py",
        "kimi_bench/scenarios/default.toml",
        "kimi_bench/scenarios/gate.toml",
        "kimi_bench/schemas/report-serve-ab.schema.json",
        "kimi_bench/schemas/scenario.schema.json",
    ):
        assert must in expected
    assert missing_from_wheel(src, wheel) == []
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        assert "kimi-bench = kimi_bench.cli.main:main" in zf.read(meta).decode()
        # nothing from the checkout's tests or reports is shipped
        assert not [n for n in zf.namelist() if n.startswith(("tests/", "reports/"))]


def test_a_package_the_build_drops_is_named_as_missing(tmp_path: Path) -> None:
    """A subfolder that automatic discovery does not see (here: kimi_bench/pipeline without
    its __init__.py) is left out of the wheel; the check names each of its files."""
    src = copy_sources(tmp_path / "src")
    (src / "kimi_bench" / "pipeline" / "__init__.py").unlink()
    wheel = build_wheel(src, tmp_path / "dist")
    missing = missing_from_wheel(src, wheel)
    pipeline = sorted(
        f"kimi_bench/pipeline/{p.name}" for p in (src / "kimi_bench" / "pipeline").glob("*.py")
    )
    assert pipeline and missing == pipeline


def test_a_data_file_the_build_drops_is_named_as_missing(tmp_path: Path) -> None:
    """A data file of a kind the package data does not list (here a .bin next to the
    schemas) is named too: the expected list is the source tree, not the build's rules."""
    src = copy_sources(tmp_path / "src")
    (src / "kimi_bench" / "schemas" / "extra.bin").write_bytes(b"\0\1")
    wheel = build_wheel(src, tmp_path / "dist")
    assert missing_from_wheel(src, wheel) == ["kimi_bench/schemas/extra.bin"]
