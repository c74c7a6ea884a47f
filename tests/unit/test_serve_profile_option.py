"""serve-ab --profile that would write nothing says so (issue 46): a regular file where the
traces' folder belongs, or a run whose every arm is an --endpoint server."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.options import ServeOptions


def test_a_file_as_the_profile_folder_is_a_usage_error(tmp_path: Path):
    afile = tmp_path / "traces.json"
    afile.write_text("{}")
    res = CliRunner().invoke(app, ["serve-ab", "--profile", str(afile), "--num-prompts", "2"])
    assert res.exit_code == 2
    assert f"--profile {afile} is a file: give a folder" in " ".join(res.output.split())


def test_profile_with_only_endpoints_points_at_profile_server(tmp_path: Path):
    with pytest.raises(ValueError, match="use --profile-server"):
        ServeOptions(profile=tmp_path / "p", endpoints=("a=http://127.0.0.1:9",))


def test_a_folder_to_be_made_is_fine(tmp_path: Path):
    assert ServeOptions(profile=tmp_path / "new").profile == tmp_path / "new"
    assert ServeOptions(profile=tmp_path).profile == tmp_path
