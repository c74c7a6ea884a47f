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
    pipeline = sorted(  # the folder and every subpackage under it (arms/, carriers/)
        p.relative_to(src).as_posix() for p in (src / "kimi_bench" / "pipeline").rglob("*.py")
    )
    assert pipeline and missing == pipeline


def test_a_data_file_the_build_drops_is_named_as_missing(tmp_path: Path) -> None:
    """A data file of a kind the package data does not list (here a .bin next to the
    schemas) is named too: the expected list is the source tree, not the build's rules."""
    src = copy_sources(tmp_path / "src")
    (src / "kimi_bench" / "schemas" / "extra.bin").write_bytes(b"\0\1")
    wheel = build_wheel(src, tmp_path / "dist")
    assert missing_from_wheel(src, wheel) == ["kimi_bench/schemas/extra.bin"]


def test_a_wheel_built_from_a_checkout_records_its_commit(tmp_path: Path) -> None:
    """Issue 28: a run from the installed wheel recorded commit "unknown". The build writes
    kimi_bench/_build_info.json (version, commit, dirty); the installed package, run from a
    folder outside any checkout, reports that commit in its environment block."""
    import json
    import os
    import subprocess
    import sys

    src = copy_sources(tmp_path / "src")
    git = ["git", "-c", "user.name=kb", "-c", "user.email=kb@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "a build"]):
        subprocess.run([*git, *args], cwd=src, check=True, capture_output=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    wheel = build_wheel(src, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        info = json.loads(zf.read("kimi_bench/_build_info.json"))
        zf.extractall(tmp_path / "site")
    assert info == {"version": "0.2.0", "commit": sha, "dirty": False}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIMI_BENCH_GIT")}
    env["PYTHONPATH"] = str(tmp_path / "site")
    code = ("import json, kimi_bench; from kimi_bench.infra.environment import git_commit; "
            "print(json.dumps([kimi_bench.__file__, git_commit()]))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    where, recorded = json.loads(done.stdout)
    assert where.startswith(str(tmp_path / "site"))
    assert recorded == {"commit": sha, "dirty": False, "source": "wheel", "built_version": "0.2.0"}


def test_a_wheel_built_outside_a_checkout_records_no_commit(tmp_path: Path) -> None:
    import json

    wheel = build_wheel(copy_sources(tmp_path / "src"), tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        assert json.loads(zf.read("kimi_bench/_build_info.json"))["commit"] is None
