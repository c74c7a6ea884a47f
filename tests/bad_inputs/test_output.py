"""Output locations that cannot be written: refused before the work (check_output_dir),
rescued after it (write_outputs -> a fallback folder and exit code 3), and atomic writes
that never leave half a file or a temp file behind."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from kimi_bench.report import writers
from kimi_bench.report.model import Report, load_report
from kimi_bench.report.output import (
    EXIT_OUTPUT_INCOMPLETE,
    OutputError,
    check_output_dir,
    check_output_file,
    write_outputs,
)
from kimi_bench.report.view import view_of
from kimi_bench.report.writers import atomic_write_text, write_json
from tests.bad_inputs import reports


def _read_only_dir(tmp_path: Path) -> Path:
    """A folder this process cannot write in: chmod 555, or (as root, which ignores
    modes) a sysfs folder; skipped where neither holds."""
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        fd, name = tempfile.mkstemp(dir=d)
    except OSError:
        return d
    os.close(fd)
    os.unlink(name)
    for cand in (Path("/sys/kernel"), Path("/sys")):
        try:
            fd, name = tempfile.mkstemp(dir=cand)
        except OSError:
            return cand
        os.close(fd)
        os.unlink(name)
    pytest.skip("no read-only folder available to this user")


def test_out_below_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=r"file is a file, so no folder can be made below it"):
        check_output_dir(tmp_path / "file" / "run" / "out")
    with pytest.raises(OutputError, match=r"--out .*file is a file, not a folder"):
        check_output_dir(tmp_path / "file")


def test_read_only_out_is_refused_before_work(tmp_path):
    ro = _read_only_dir(tmp_path)
    with pytest.raises(OutputError, match=r"cannot write in .*: (permission denied|read-only)"):
        check_output_dir(ro / "new-run")
    assert not (ro / "new-run").exists()


def test_writable_out_passes_and_is_left_untouched(tmp_path):
    check_output_dir(tmp_path / "a" / "b")
    check_output_file(tmp_path / "gate.xml", "--junit")
    assert sorted(tmp_path.iterdir()) == []  # the probe is removed, nothing is created


def test_output_file_that_is_a_folder_is_refused(tmp_path):
    with pytest.raises(OutputError, match=r"--junit .* is a folder, not a file"):
        check_output_file(tmp_path, "--junit")


def _emit(report: Report):
    def write(folder: Path) -> list[Path]:
        return [
            write_json(report, folder / "report.json"),
            writers.write_markdown(view_of(report), folder / "report.md"),
        ]

    return write


def test_failing_output_falls_back_to_a_printed_folder_with_exit_3(tmp_path):
    report = Report.from_dict(reports.micro())
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").mkdir()  # the final rename onto it fails: IsADirectoryError
    result = write_outputs(_emit(report), out)
    try:
        assert result.fallback and result.exit_code == EXIT_OUTPUT_INCOMPLETE == 3
        assert str(out) in (result.error or "") and "directory" in (result.error or "")
        assert result.folder != out and result.folder.name.startswith("kimibench-rescue-")
        back = load_report(result.folder / "report.json")
        assert back.summary == report.to_dict()["summary"]
        assert (result.folder / "report.md").read_text().startswith("# kimi-bench micro")
        assert [p.name for p in out.iterdir()] == ["report.json"]  # no temp file left
    finally:
        for f in result.folder.iterdir():
            f.unlink()
        result.folder.rmdir()


def test_successful_output_has_exit_0(tmp_path):
    result = write_outputs(_emit(Report.from_dict(reports.micro())), tmp_path / "o")
    assert not result.fallback and result.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["report.json", "report.md"]


def test_full_disk_during_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    target.write_text("old report\n")

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writers.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(target, "new report\n")
    assert target.read_text() == "old report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_atomic_write_gives_a_new_file_rw_r__r__and_keeps_an_existing_files_mode(tmp_path):
    new = atomic_write_text(tmp_path / "new.md", "new\n")
    assert new.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0o600
    old = tmp_path / "old.md"
    old.write_text("old\n")
    old.chmod(0o640)
    atomic_write_text(old, "replaced\n")
    assert old.stat().st_mode & 0o777 == 0o640 and old.read_text() == "replaced\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.md", "old.md"]
