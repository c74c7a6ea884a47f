"""Nothing lost between runs: an output folder belongs to one run at a time (a second run
given it exits 2 naming the holder), a folder holding a finished report is refused unless
--overwrite, and SIGTERM (what CI runners and ``timeout`` send) is named in the report it
leaves. Real ``kimi-bench`` processes, started as a user starts them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.report.output import LOCK_NAME, OutputError, claim_output_dir

KIMI_BENCH = shutil.which("kimi-bench") or str(Path(sys.executable).parent / "kimi-bench")


def _images(folder: Path, n: int = 2) -> Path:
    folder.mkdir()
    for i in range(n):
        Image.new("RGB", (40 + i, 30), (10 * i, 20, 30)).save(folder / f"im{i}.png")
    return folder


def _parity(images: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [KIMI_BENCH, "parity", "--images", str(images), "--device", "cpu", "--output-dir",
         str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_held_folder_is_refused_and_released_when_the_run_ends(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = claim_output_dir(out)
    with pytest.raises(
        OutputError, match=r"is in use by kimi-bench pid \d+ .*another --output-dir"
    ):
        claim_output_dir(out)
    assert [p.name for p in out.iterdir()] == [LOCK_NAME]
    first.release()
    assert list(out.iterdir()) == []  # released: no lock file left behind
    claim_output_dir(out).release()  # free again
    assert list(out.iterdir()) == []


def test_a_claim_that_locked_a_removed_lock_file_tries_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that opened the lock file just before its holder finished (and removed it)
    holds a file no one else can see: it must notice and lock the folder's file instead."""
    from kimi_bench.report import output

    out = tmp_path / "out"
    real, raced = output._lock, []

    def holder_finishes_in_between(folder: Path, lock: Path, option: str) -> int:
        fd = real(folder, lock, option)
        if not raced:
            raced.append(lock)
            os.unlink(lock)  # the holder's release, between our open and our lock
        return fd

    monkeypatch.setattr(output, "_lock", holder_finishes_in_between)
    claim = claim_output_dir(out)
    try:
        assert raced and (out / LOCK_NAME).is_file()
        with pytest.raises(OutputError, match="is in use"):
            claim_output_dir(out)  # the folder's own lock file is the one held
    finally:
        claim.release()
    assert list(out.iterdir()) == []


@pytest.mark.slow
def test_a_finished_run_leaves_no_lock_file(tmp_path: Path) -> None:
    """The installed command, run to the end: the folder holds its report, no lock."""
    out = tmp_path / "out"
    proc = _parity(_images(tmp_path / "img"), out)
    rc = proc.wait(timeout=600)
    assert rc == 0, proc.communicate()
    names = sorted(p.name for p in out.iterdir())
    assert "report.json" in names and LOCK_NAME not in names, names


def test_a_finished_report_is_refused_unless_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}")
    with pytest.raises(OutputError, match=r"already holds a finished report \(report.json\)"):
        claim_output_dir(out)
    claim_output_dir(out, overwrite=True).release()
    assert not (out / "report.json").exists()  # --overwrite removes the report it replaces
    (out / "index.md").write_text("# kimi-bench run\n")  # kimi-bench run's folder
    with pytest.raises(OutputError, match=r"--overwrite"):
        claim_output_dir(out)


def test_cli_second_run_into_a_finished_folder_exits_2_and_keeps_the_first(tmp_path: Path) -> None:
    images = _images(tmp_path / "img")
    out = tmp_path / "out"
    base = ["parity", "--images", str(images), "--device", "cpu", "--output-dir", str(out)]
    first = CliRunner().invoke(app, base)
    assert first.exit_code == 0, first.output
    before = (out / "report.json").read_bytes()
    second = CliRunner().invoke(app, [*base, "--seed", "3"])
    assert second.exit_code == 2
    assert "already holds a finished report" in _flat(second.output)
    assert "Traceback" not in second.output
    assert (out / "report.json").read_bytes() == before  # the first result is not lost
    again = CliRunner().invoke(app, [*base, "--seed", "3", "--overwrite"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "report.json").read_text())["environment"]["seed"] == 3


@pytest.mark.slow
def test_two_concurrent_runs_into_one_folder_one_wins_one_exits_2(tmp_path: Path) -> None:
    images = _images(tmp_path / "img")
    out = tmp_path / "shared-out"
    procs = [_parity(images, out), _parity(images, out)]
    results = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 2], results
    loser = next(err for rc, _, err in results if rc == 2)
    assert "Traceback" not in loser
    assert "is in use by kimi-bench pid" in _flat(loser) or "already holds a finished report" in (
        _flat(loser)
    )
    winner = next(err for rc, _, err in results if rc == 0)
    assert f"report: {out / 'report.json'}" in _flat(winner)
    assert "report:" not in loser  # the loser never claims a report it did not write
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "parity" and rep["summary"]["accepted"] == 2
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def _wait_for_claim(out: Path, proc: subprocess.Popen[str], timeout_s: float = 300) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lock = out / LOCK_NAME
        if lock.exists() and f"pid {proc.pid} " in lock.read_text():
            return lock.read_text()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("the run never claimed its folder")


@pytest.mark.slow
def test_running_folder_is_refused_and_sigterm_is_named_in_the_report(tmp_path: Path) -> None:
    out = tmp_path / "busy"
    micro = subprocess.Popen(
        [KIMI_BENCH, "micro", "--synthetic", "1x64x64", "--ranks", "1", "--repeats", "10000",
         "--warmup", "0", "--device", "cpu", "--output-dir", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        _wait_for_claim(out, micro)
        second = _parity(_images(tmp_path / "img"), out)
        _, err = second.communicate(timeout=600)
        assert second.returncode == 2, err
        assert f"is in use by kimi-bench pid {micro.pid} " in _flat(err)
        assert "Traceback" not in err
        assert not (out / "report.json").exists()  # nothing written by the refused run
    finally:
        micro.send_signal(signal.SIGTERM)  # as a CI timeout stops it
        _, micro_err = micro.communicate(timeout=300)
    assert micro.returncode == 1, micro_err
    assert "Traceback" not in micro_err
    rep = json.loads((out / "report.json").read_text())
    assert rep["kind"] == "micro"
    assert rep["summary"]["error"].startswith("interrupted by SIGTERM")
    assert "Ctrl-C" not in rep["summary"]["error"]
    assert any(n.startswith("run stopped early: interrupted by SIGTERM") for n in rep["notes"])
    # the interrupted run's report is a result too: a later run does not overwrite it
    later = CliRunner().invoke(app, ["parity", "--device", "cpu", "--output-dir", str(out)])
    assert later.exit_code == 2 and "already holds a finished report" in _flat(later.output)


def test_parity_interrupted_by_sigterm_keeps_inputs_done_and_names_the_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGTERM to this process in the middle of parity's loop (sent by the second
    input's loader): the report keeps the first input and says SIGTERM, exit 1."""
    _sigterm_loader_corpus(monkeypatch)
    images = _images(tmp_path / "img", 1)
    handler_before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        ["parity", "--images", str(images), "--device", "cpu", "--batch-size", "1",
         "--output-dir", str(out)],
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    rep = json.loads((out / "report.json").read_text())
    assert rep["summary"]["verdict"].startswith("INCOMPLETE: interrupted by SIGTERM")
    assert [r["name"] for r in rep["results"]] == ["im0.png"]
    assert rep["results"][0]["bit_exact_fp32"] is True
    assert "interrupted by SIGTERM" in _flat(res.output)
    assert signal.getsignal(signal.SIGTERM) == handler_before  # parity put it back


def _sigterm_loader_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parity's folder corpus plus one input whose loader sends this process a real
    SIGTERM (as a CI timeout would, in the middle of the loop)."""
    from kimi_bench.bench import parity as parity_mod
    from kimi_bench.domain.corpus import CorpusEntry

    real = parity_mod.folder_corpus

    def corpus(folder: Path, *args: object, **kwargs: object) -> list[CorpusEntry]:
        def terminate() -> object:
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM did not interrupt")

        entries = real(folder, *args, **kwargs)  # type: ignore[arg-type]
        return [*entries, CorpusEntry("sigterm_here", "test", terminate)]

    monkeypatch.setattr(parity_mod, "folder_corpus", corpus)


def test_run_stops_after_a_part_interrupted_by_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sigterm_loader_corpus(monkeypatch)
    images = _images(tmp_path / "img", 1)
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        f"[parity]\nimages = {json.dumps(str(images))}\nbatch_size = 1\n\n"
        '[micro]\nsynthetic = "1x64x48"\nranks = 1\nrepeats = 1\nwarmup = 0\n'
    )
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app, ["run", "--scenario", str(scenario), "--device", "cpu", "--output-dir", str(out)]
    )
    assert res.exit_code == 1, res.output  # the gate fails the incomplete part
    flat = _flat(res.output)
    assert "interrupted by SIGTERM" in flat and "(not run: micro)" in flat
    assert not (out / "micro").exists()
    rep = json.loads((out / "parity" / "report.json").read_text())
    assert rep["summary"]["verdict"].startswith("INCOMPLETE: interrupted by SIGTERM")
    assert "parity.complete" in (out / "gate.md").read_text()


@pytest.mark.slow
def test_serve_ab_stopped_by_sigterm_names_it_in_the_report(tmp_path: Path) -> None:
    out = tmp_path / "sab"
    proc = subprocess.Popen(
        [KIMI_BENCH, "serve-ab", "--request-rate", "1", "--num-prompts", "500",
         "--image-resolution", "48x64", "--ranks", "1", "--processor-workers", "1",
         "--warmup-requests", "0", "--device", "cpu", "--output-dir", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        _wait_for_claim(out, proc)
        deadline = time.monotonic() + 300
        # the first partial report lands after the first pipeline; wait for requests to flow
        while not (out / "servers").exists() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        time.sleep(5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    rep = json.loads((out / "report.json").read_text())
    assert rep["summary"]["error"].startswith("interrupted by SIGTERM"), rep["summary"]
    assert "Ctrl-C" not in json.dumps(rep["summary"])


def test_runs_left_to_the_default_folder_get_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs started in the same second share a default name: the second gets -2."""
    from kimi_bench.cli import output as common

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(common, "default_out", lambda kind: Path("reports/runs") / f"{kind}-1")
    first, _ = common.resolve_output({}, "parity")
    second, _ = common.resolve_output({}, "parity")
    assert (first, second) == (Path("reports/runs/parity-1"), Path("reports/runs/parity-1-2"))
    common.release_claims()
