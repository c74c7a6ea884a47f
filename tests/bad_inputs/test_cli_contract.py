"""What CI reads from kimi-bench: exit codes (an internal error is 4, never 1), stdout that
is exactly one JSON document with --format json, options that do what they say
(--append-jsonl in run, an empty --summary), and inputs refused as what they are (NaN
tensors, decompression bombs in micro --images, built-in inputs an install lacks)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from tests.conftest import TinyRun

KIMI_BENCH = shutil.which("kimi-bench") or str(Path(sys.executable).parent / "kimi-bench")
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PARITY = REPO / "reports" / "examples" / "cpu-run" / "parity"
COMMANDS = ["parity", "micro", "serve-ab", "serve", "gate", "compare", "run", "project", "render"]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _kimi(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KIMI_BENCH, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _one_json_document(stdout: str) -> dict:
    doc = json.loads(stdout)  # raises if anything but one document is on stdout
    assert isinstance(doc, dict) and doc
    return doc


# ------------------------------------------------------------------- internal errors


@pytest.mark.slow
def test_an_unexpected_exception_exits_4_with_one_line_and_a_traceback_file(tmp_path: Path):
    """A bug (here: render's drawing raises) must not read as a measured difference (1)."""
    code = (
        "import sys, kimi_bench.report.rerender as f\n"
        "def boom(path):\n"
        "    raise RuntimeError('boom in render_tree')\n"
        "f.render_tree = boom\n"
        "from kimi_bench.cli.main import main\n"
        f"sys.argv = ['kimi-bench', 'render', {str(EXAMPLE_PARITY)!r}]\n"
        "main()\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert res.returncode == 4, res.stderr
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    m = re.search(r"internal error: RuntimeError: boom in render_tree .*traceback: (\S+)", lines[0])
    assert m, lines[0]
    crash = Path(m.group(1))
    try:
        text = crash.read_text()
        assert "Traceback (most recent call last)" in text and "boom in render_tree" in text
        assert "kimi-bench render" in text  # the command line that crashed
    finally:
        crash.unlink(missing_ok=True)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_documents_exit_code_4(command: str) -> None:
    res = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    assert "Exit code 4: an internal error" in _flat(res.output)


# ------------------------------------------------------------------------ --format json


def _png_folder(folder: Path) -> Path:
    folder.mkdir()
    Image.new("RGB", (48, 32), (200, 10, 10)).save(folder / "a.png")
    return folder


@pytest.mark.slow  # a whole parity run in its own process
def test_parity_format_json_prints_one_document_and_messages_on_stderr(tmp_path: Path):
    images = _png_folder(tmp_path / "img")
    res = _kimi("parity", "--images", str(images), "--device", "cpu", "--format", "json",
                "--output-dir", str(tmp_path / "o"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = _one_json_document(res.stdout)
    assert [r["input"] for r in doc["parity (eager vs deferred, torch.equal)"]] == ["a.png"]
    assert "BIT-IDENTICAL" in res.stderr and "report:" in res.stderr


@pytest.mark.slow
def test_micro_format_json_prints_one_document(tmp_path: Path):
    res = _kimi("micro", "--synthetic", "1x64x48", "--ranks", "1", "--repeats", "1",
                "--warmup", "0", "--device", "cpu", "--format", "json",
                "--output-dir", str(tmp_path / "m"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = _one_json_document(res.stdout)
    assert {"Stages (ms, bytes)", "Copies (ledger per arm and stage, one repeat)",
            "Control plane and payload cost"} <= set(doc)  # fmt: skip
    assert doc["Stages (ms, bytes)"], "the stage table has rows"
    assert "report:" in res.stderr


_TINY_SERVE = ["--request-rate", "inf", "--num-prompts", "2", "--image-resolution", "48x64",
               "--ranks", "1", "--processor-workers", "1", "--warmup-requests", "0",
               "--unique-images", "2"]  # fmt: skip


@pytest.mark.slow
def test_serve_ab_format_json_prints_one_document(tmp_path: Path):
    res = _kimi("serve-ab", *_TINY_SERVE, "--device", "cpu", "--format", "json",
                "--output-dir", str(tmp_path / "s"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = _one_json_document(res.stdout)
    assert {r["arm"] for r in doc["Per rate and arm"]} == {"eager", "deferred"}
    ab = doc["A/B (each arm vs eager; signed %, arm minus eager)"]
    assert [r["comparison"] for r in ab] == ["deferred vs eager"]


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_run")
def test_run_format_json_and_append_jsonl_one_line_per_part(tiny_run: TinyRun):
    err = "\n".join(line for line, _ in tiny_run.lines)
    assert tiny_run.code in (0, 1), err  # the gate's verdict on a CPU run
    doc = _one_json_document(tiny_run.stdout)
    assert doc["gate"]
    assert "gate PASS" in err or "gate FAIL" in err
    # the run ends with each part's verdict lines, as index.html shows them (issue 28)
    from kimi_bench.report import verdicts
    from kimi_bench.report.model import load_report

    flat = " ".join(err.split())
    for part in ("parity", "micro", "serve-ab"):
        assert f"{part}:" in flat
        for line in verdicts.lines(load_report(tiny_run.out / part).to_dict()):
            assert " ".join(line.text.split()) in flat, line.text
    lines = [json.loads(line) for line in tiny_run.jsonl.read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["earlier", "parity", "micro", "serve-ab"]
    for line, part in zip(lines[1:], ("parity", "micro", "serve-ab"), strict=True):
        assert line["report"] == str(tiny_run.out / part / "report.json")
        assert (tiny_run.out / part / "report.json").is_file() and line["verdict"]


# ------------------------------------------------------------------ options that work


def test_gate_with_an_empty_summary_writes_none_and_says_so(tmp_path: Path):
    """``--summary "$GITHUB_STEP_SUMMARY"`` with the variable unset is an empty value."""
    res = CliRunner().invoke(app, ["gate", str(EXAMPLE_PARITY), "--summary", "", "--junit", ""])
    assert res.exit_code in (0, 1), res.output
    out = _flat(res.output)
    assert "--summary is empty (an unset variable?): nothing written there" in out
    assert "--junit is empty" in out
    assert "is a folder" not in out
    assert "gate PASS" in out or "gate FAIL" in out


def test_compare_with_an_empty_markdown_compares(tmp_path: Path):
    res = CliRunner().invoke(
        app, ["compare", str(EXAMPLE_PARITY), str(EXAMPLE_PARITY), "--markdown", ""]
    )
    assert res.exit_code == 0, res.output
    assert "--markdown is empty" in _flat(res.output)


# ------------------------------------------------------------------ inputs refused


def test_nan_and_inf_tensors_are_refused_as_invalid_input_not_differences(tmp_path: Path):
    folder = tmp_path / "t"
    folder.mkdir()
    torch.save(torch.full((3, 20, 24), float("nan")), folder / "nan.pt")
    inf = torch.rand(3, 20, 24) * 255
    inf[0, 0, 0] = float("inf")
    torch.save(inf, folder / "inf.pt")
    import numpy as np

    np.save(folder / "nan.npy", np.full((20, 24, 3), np.nan, dtype=np.float32))
    torch.save(torch.rand(3, 20, 24) * 255, folder / "ok.pt")
    out = tmp_path / "o"
    res = CliRunner().invoke(
        app, ["parity", "--images", str(folder), "--device", "cpu", "--output-dir", str(out)]
    )
    assert res.exit_code == 0, res.output  # the valid input is identical; the rest refused
    rep = json.loads((out / "report.json").read_text())
    rows = {r["name"]: r for r in rep["results"]}
    for name, what in (("nan.pt", "1,440 NaN"), ("inf.pt", "1 infinite"), ("nan.npy", "NaN")):
        assert rows[name]["error"].startswith("InputError: invalid tensor"), rows[name]
        assert what in rows[name]["error"]
        assert rows[name]["bit_exact_fp32"] is None  # not reported as a difference
    assert rows["ok.pt"]["bit_exact_fp32"] is True
    assert rep["summary"]["differing"] == [] and rep["summary"]["errors"] == 3


def _bomb(path: Path) -> None:
    """A small PNG whose header promises far more pixels than PIL's bomb limit."""
    Image.new("1", (20_000, 20_000)).save(path, optimize=True)


@pytest.mark.slow
def test_micro_images_skips_a_decompression_bomb_with_a_note(tmp_path: Path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    _bomb(folder / "bomb.png")
    Image.new("RGB", (64, 48), (1, 2, 3)).save(folder / "ok.png")
    out = tmp_path / "m"
    res = CliRunner().invoke(
        app,
        ["micro", "--images", str(folder), "--ranks", "1", "--repeats", "1", "--warmup", "0",
         "--device", "cpu", "--output-dir", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output and "DecompressionBombError" not in res.output
    rep = json.loads((out / "report.json").read_text())
    skipped = [n for n in rep["notes"] if n.startswith("skipped bomb.png: decompression bomb")]
    assert skipped, rep["notes"]
    assert "skipped bomb.png" in _flat(res.output)


@pytest.mark.slow
def test_micro_images_of_only_bombs_is_a_usage_error(tmp_path: Path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    _bomb(folder / "bomb.png")
    res = CliRunner().invoke(
        app, ["micro", "--images", str(folder), "--device", "cpu", "--output-dir",
              str(tmp_path / "m")],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "holds no image PIL can open (bomb.png: decompression bomb" in _flat(res.output)
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_builtin_corpus_without_the_photos_extra_says_what_was_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import kimi_bench.domain.corpus as corpus

    monkeypatch.setattr(corpus, "_photo_path", lambda pkg, rel: None)  # as on a base install
    out = tmp_path / "o"
    res = CliRunner().invoke(app, ["parity", "--device", "cpu", "--output-dir", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "report.json").read_text())
    assert rep["summary"]["inputs"] == 24
    note = next(n for n in rep["notes"] if n.startswith("built-in inputs skipped"))
    for name in ("photo_grace_hopper (from matplotlib)", "photo_china (from scikit-learn)",
                 "photo_flower (from scikit-learn)", "kimi-bench[plot,photos]"):  # fmt: skip
        assert name in note
    assert "built-in inputs skipped: photo_grace_hopper" in _flat(res.output)
