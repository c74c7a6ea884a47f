"""A report's data as ``report.json`` or ``report.json.gz`` (``kimi_bench/report/files.py``):
both load the same, folders holding either are found by every search, a path naming a
``report.json`` that was packed reads its ``.gz``, the decompressed size is bounded like a
plain file's, and the checkout's large committed reports stay packed
(scripts/pack-reports.py)."""

from __future__ import annotations

import gzip
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from kimi_bench.ci.baseline import find_baseline
from kimi_bench.cli.main import app
from kimi_bench.report import figures, model
from kimi_bench.report.model import ReportError, find_report_files, load_report
from kimi_bench.report.output import OutputError, claim_output_dir
from tests.committed import REPO, committed_reports

EXAMPLE = REPO / "reports" / "examples" / "cpu-run"


def _pack_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "pack_reports", REPO / "scripts" / "pack-reports.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


pack = _pack_script()


def packed_copy(src: Path, dest: Path) -> Path:
    """``src``'s report folder copied to ``dest`` with its report.json packed."""
    shutil.copytree(src, dest)
    pack.pack(dest / "report.json")
    return dest


def test_a_packed_report_loads_as_the_plain_one(tmp_path: Path) -> None:
    folder = packed_copy(EXAMPLE / "micro", tmp_path / "micro")
    assert not (folder / "report.json").exists()
    plain, packed = load_report(EXAMPLE / "micro"), load_report(folder)
    assert packed.source == folder / "report.json.gz"
    assert packed.to_dict() == plain.to_dict()
    # a path written before the report was packed still reads it
    assert load_report(folder / "report.json").to_dict() == plain.to_dict()


def test_packing_is_reproducible_and_exact(tmp_path: Path) -> None:
    data = (EXAMPLE / "parity" / "report.json").read_bytes()
    assert pack.packed(data) == pack.packed(data)
    assert gzip.decompress(pack.packed(data)) == data


def test_searches_find_either_name_once_per_folder(tmp_path: Path) -> None:
    packed_copy(EXAMPLE / "micro", tmp_path / "a")
    shutil.copytree(EXAMPLE / "parity", tmp_path / "b")
    both = packed_copy(EXAMPLE / "serve-ab", tmp_path / "c")
    shutil.copy2(EXAMPLE / "serve-ab" / "report.json", both / "report.json")
    want = [tmp_path / "a" / "report.json.gz", tmp_path / "b" / "report.json", both / "report.json"]
    assert find_report_files(tmp_path) == want
    assert figures.find_reports(tmp_path) == want
    assert load_report(both).source == both / "report.json"


def test_the_gate_and_the_baseline_search_read_packed_folders(tmp_path: Path) -> None:
    base = packed_copy(EXAMPLE / "micro", tmp_path / "base" / "micro")
    rep = load_report(EXAMPLE / "micro")
    found = find_baseline(rep, tmp_path / "base")
    assert found is not None and found.source == base / "report.json.gz"
    assert find_baseline(rep, base) is not None  # the folder itself
    done = CliRunner().invoke(app, ["gate", str(base), "--baseline", str(EXAMPLE / "micro")])
    # the same data on both sides: every rule passes, the baseline's included
    assert done.exit_code == 0 and "baseline.micro.speedup" in done.output, done.output


def test_calibrate_reads_packed_runs_by_folder_or_by_their_old_file_name(tmp_path: Path) -> None:
    from kimi_bench.cli.calibrate import _reports_in

    folder = packed_copy(EXAMPLE / "micro", tmp_path / "run")
    for given in (folder, folder / "report.json", folder / "report.json.gz", tmp_path):
        (rep,) = _reports_in(given, "--runs")
        assert rep.source == folder / "report.json.gz"
    with pytest.raises(ReportError, match="does not exist"):
        _reports_in(tmp_path / "other" / "report.json", "--runs")


def test_a_packed_report_is_a_finished_report_for_the_writers(tmp_path: Path) -> None:
    folder = packed_copy(EXAMPLE / "parity", tmp_path / "parity")
    with pytest.raises(OutputError, match=r"report\.json\.gz"):
        claim_output_dir(folder)


def test_a_gzip_that_inflates_past_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "bomb"
    folder.mkdir()
    (folder / "report.json.gz").write_bytes(gzip.compress(b" " * 1_000_000))
    monkeypatch.setattr(model, "MAX_REPORT_BYTES", 100_000)
    with pytest.raises(ReportError, match="decompresses to more than 100,000 bytes"):
        load_report(folder)


def test_a_broken_gzip_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "report.json.gz"
    path.write_bytes(gzip.compress(b'{"kind": "micro"}')[:-6])
    with pytest.raises(ReportError, match=r"report\.json\.gz is not gzip-compressed data"):
        load_report(path)


def test_large_committed_reports_are_packed() -> None:
    """The checkout stays small: no committed report.json over pack-reports' size."""
    assert pack.to_pack(REPO / "reports", pack.MIN_BYTES) == []
    assert any(p.name == "report.json.gz" for p in committed_reports())
