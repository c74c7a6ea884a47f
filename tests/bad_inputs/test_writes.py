"""Every file the user asks for is written, or the command says which one was not and exits
3 (or 2, before any work, when the place can never take it): --append-jsonl, gate --junit
and --summary, compare --markdown, render --html, parity --dump and the report folder
itself; no user file is replaced without --overwrite, and --overwrite leaves nothing of the
report it replaces. Full disks: /dev/full for one file, a tiny tmpfs for a folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kimi_bench.report.output import LOCK_NAME, REPORT_FILES
from tests.bad_inputs import reports
from tests.bad_inputs.cli import FULL, flat, kimi, needs_dev_full, on_tiny_tmpfs, png_folder

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PARITY = REPO / "reports" / "examples" / "cpu-run" / "parity"
NO_SPACE = "was not written: no space left on device"
TINY_MICRO = ["--synthetic", "1x32x24", "--ranks", "1", "--repeats", "1", "--warmup", "0",
              "--control-repeats", "0", "--device", "cpu"]  # fmt: skip


def _gated(tmp_path: Path) -> Path:
    """A folder holding a valid parity report the default gate rules pass."""
    return reports.put(reports.parity(), tmp_path / "rep").parent


# ------------------------------------------------------------------ gate, compare, render


@pytest.mark.slow
def test_gate_outputs_to_a_full_disk_exit_3_naming_each(tmp_path: Path) -> None:
    needs_dev_full()
    res = kimi("gate", str(_gated(tmp_path)), "--junit", str(FULL), "--summary", str(FULL))
    assert res.returncode == 3, flat(res)
    for option in ("--junit", "--summary"):
        assert f"{option} /dev/full {NO_SPACE}" in flat(res)
    assert "gate PASS" in flat(res)  # the verdict stands; only its files are missing
    assert FULL.is_char_device()  # written into, never replaced by a regular file


@pytest.mark.slow  # a kimi-bench process
def test_gate_output_to_a_folder_is_refused_before_gating(tmp_path: Path) -> None:
    res = kimi("gate", str(_gated(tmp_path)), "--summary", str(tmp_path))
    assert res.returncode == 2, flat(res)
    assert f"--summary {tmp_path} is a folder, not a file" in flat(res)


@pytest.mark.slow  # a kimi-bench process
def test_gate_outputs_to_a_special_file_are_written_into_it(tmp_path: Path) -> None:
    res = kimi("gate", str(_gated(tmp_path)), "--summary", "/dev/stdout")
    assert res.returncode == 0, flat(res)
    assert "## kimi-bench gate PASS" in res.stdout  # the summary reached the device


@pytest.mark.slow
def test_compare_markdown_to_a_full_disk_exits_3(tmp_path: Path) -> None:
    needs_dev_full()
    a = reports.put(reports.micro(), tmp_path / "a").parent
    b = reports.put(reports.micro([11.0, 11.5, 10.8, 11.2]), tmp_path / "b").parent
    res = kimi("compare", str(a), str(b), "--markdown", str(FULL))
    assert res.returncode == 3, flat(res)
    assert f"--markdown /dev/full {NO_SPACE}" in flat(res)
    assert "owner_materialize" in res.stdout  # the comparison itself was shown


@pytest.mark.slow  # a kimi-bench process
def test_render_html_to_a_folder_is_refused_before_drawing(tmp_path: Path) -> None:
    res = kimi("render", str(EXAMPLE_PARITY), "--html", str(tmp_path))
    assert res.returncode == 2, flat(res)
    assert f"--html {tmp_path} is a folder, not a file" in flat(res)
    assert "Traceback" not in flat(res) and "IsADirectoryError" not in flat(res)


@pytest.mark.slow  # draws the figures again (matplotlib)
def test_render_html_to_a_full_disk_exits_3(tmp_path: Path) -> None:
    needs_dev_full()
    rep = tmp_path / "parity"
    shutil.copytree(EXAMPLE_PARITY, rep)  # render redraws next to the report: a copy
    res = kimi("render", str(rep), "--html", str(FULL))
    assert res.returncode == 3, flat(res)
    assert f"--html /dev/full {NO_SPACE}" in flat(res)
    assert (rep / "report.html").is_file()  # the pages beside the reports were written


@pytest.mark.slow
def test_render_html_of_a_folder_without_reports_is_refused(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    res = kimi("render", str(tmp_path / "none"), "--html", str(tmp_path / "all.html"))
    assert res.returncode == 2, flat(res)
    assert "no report.json under" in flat(res) and "not written" in flat(res)
    assert not (tmp_path / "all.html").exists()


# --------------------------------------------------------------------------- parity runs


@pytest.mark.slow
def test_append_jsonl_to_a_full_disk_exits_3_after_the_report(tmp_path: Path) -> None:
    needs_dev_full()
    images = png_folder(tmp_path / "img")
    out = tmp_path / "o"
    res = kimi("parity", "--images", str(images), "--device", "cpu", "--output-dir", str(out),
               "--append-jsonl", str(FULL))  # fmt: skip
    assert res.returncode == 3, flat(res)
    assert f"--append-jsonl /dev/full {NO_SPACE}" in flat(res)
    assert json.loads((out / "report.json").read_text())["summary"]["accepted"] == 1


@pytest.mark.slow  # the command imports torch before it checks this
def test_append_jsonl_to_a_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    res = kimi("micro", *TINY_MICRO, "--output-dir", str(tmp_path / "o"),
               "--append-jsonl", str(tmp_path))  # fmt: skip
    assert res.returncode == 2, flat(res)
    assert f"--append-jsonl {tmp_path} is a folder, not a file" in flat(res)
    assert not (tmp_path / "o").exists()  # refused before the output folder is claimed


@pytest.mark.slow
def test_a_report_folder_on_a_full_file_system_exits_3_with_the_fallback(tmp_path: Path) -> None:
    """12 KiB: the up-front check and the lock fit, the report does not."""
    images = png_folder(tmp_path / "img")
    out = tmp_path / "small" / "o"
    res = kimi("parity", "--images", str(images), "--device", "cpu", "--output-dir", str(out),
               prefix=on_tiny_tmpfs(tmp_path / "small"), env={"TMPDIR": str(tmp_path)})  # fmt: skip
    text = flat(res)
    assert res.returncode == 3, text
    assert f"could not write {out}: no space left on device; the report is in" in text
    rescued = [p for p in tmp_path.iterdir() if p.name.startswith("kimibench-rescue-")]
    assert len(rescued) == 1 and (rescued[0] / "report.json").is_file()


@pytest.mark.slow
def test_dump_never_replaces_a_users_file_without_overwrite(tmp_path: Path) -> None:
    images = png_folder(tmp_path / "img", ("a.png", "b.png"))
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "a.png.pt").write_bytes(b"the user's own file")
    args = ["parity", "--images", str(images), "--device", "cpu", "--dump", str(dump)]
    res = kimi(*args, "--output-dir", str(tmp_path / "o1"))
    assert res.returncode == 2, flat(res)
    assert f"--dump {dump} already holds a.png.pt; give an empty folder, or --overwrite" in flat(
        res
    )
    assert (dump / "a.png.pt").read_bytes() == b"the user's own file"
    assert not (dump / "b.png.pt").exists() and not (tmp_path / "o1" / "report.json").exists()
    ok = kimi(*args, "--output-dir", str(tmp_path / "o2"), "--overwrite")
    assert ok.returncode == 0, flat(ok)
    assert (dump / "a.png.pt").read_bytes()[:2] == b"PK"  # a torch.save zip now


@pytest.mark.slow
def test_dump_to_a_full_file_system_exits_3_and_keeps_the_results(tmp_path: Path) -> None:
    images = png_folder(tmp_path / "img", size=(400, 300))  # ~1.4 MB of features per dump
    dump = tmp_path / "small" / "dump"
    out = tmp_path / "o"
    tiny = on_tiny_tmpfs(tmp_path / "small", "64k")
    res = kimi("parity", "--images", str(images), "--device", "cpu", "--dump", str(dump),
               "--output-dir", str(out), prefix=tiny)  # fmt: skip
    assert res.returncode == 3, flat(res)
    assert f"--dump {dump / 'a.png.pt'} {NO_SPACE}" in flat(res)
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["all_bit_exact_fp32"] is True  # the measurement stands
    assert report["dump_error"].startswith(f"--dump {dump / 'a.png.pt'} was not written")


@pytest.mark.slow  # the command imports torch before it checks this
def test_output_or_dump_folder_that_is_the_images_folder_is_refused(tmp_path: Path) -> None:
    images = png_folder(tmp_path / "img")
    before = sorted(p.name for p in images.iterdir())
    for option in ("--output-dir", "--dump"):
        extra = [] if option == "--output-dir" else ["--output-dir", str(tmp_path / "o")]
        res = kimi("parity", "--images", str(images), "--device", "cpu", option, str(images),
                   *extra)  # fmt: skip
        assert res.returncode == 2, flat(res)
        assert f"{option} {images} is the --images folder" in flat(res)
        assert "read as inputs by the next run" in flat(res)
        assert sorted(p.name for p in images.iterdir()) == before  # not even a lock file


@pytest.mark.slow
def test_overwrite_into_another_kinds_folder_leaves_no_old_file(tmp_path: Path) -> None:
    out = tmp_path / "o"
    images = png_folder(tmp_path / "img")
    first = kimi("parity", "--images", str(images), "--device", "cpu", "--output-dir", str(out))
    assert first.returncode == 0, flat(first)
    parity_files = {p.name for p in out.iterdir()} - {LOCK_NAME}
    assert parity_files <= REPORT_FILES, parity_files - REPORT_FILES
    (out / "notes.txt").write_text("mine")
    again = kimi("micro", *TINY_MICRO, "--output-dir", str(out), "--overwrite")
    assert again.returncode == 0, flat(again)
    micro_files = {p.name for p in out.iterdir()} - {LOCK_NAME, "notes.txt"}
    assert micro_files <= REPORT_FILES, micro_files - REPORT_FILES
    assert "parity.csv" not in micro_files and "parity_grid.png" not in micro_files
    assert json.loads((out / "report.json").read_text())["kind"] == "micro"
    assert (out / "notes.txt").read_text() == "mine"  # not a report file: the user's
