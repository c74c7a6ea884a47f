"""Issue 43's acceptance on the CPU, through the installed command: serve-ab over a folder of
30 mixed JPEG and PNG photos (64x64 to 4000x3000) with 1-4 images per request, both
runtime profiles, eager/deferred/deferred-decode: decisions, bytes and TTFT per size bucket,
and the per-image (sglang-0.5.23) vs per-request (pr-33921) decision on mixed requests in
the copy ledger; a JSONL request file with URL images against the emulator servers; the
capacity mode reporting each arm's capacity and the gain over eager, and keeping every
probe it measured when interrupted."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from kimi_bench.serving.file_server import serve_images
from tests.conftest import popen_kw

pytestmark = pytest.mark.slow

ARMS = ("eager", "deferred", "deferred-decode")
# (width, height, format, mode): two big ones only (the run stays minutes on 2 cores); the
# RGBA PNG's raw bytes exceed its FP32 patches under kimi-k2.5 (4 channels, resized to
# 16384 patches), so the byte heuristic keeps it eager while the small ones defer
BIG = [(4000, 3000, "PNG", "RGBA"), (4000, 3000, "JPEG", "RGB")]
SIDES = [64, 96, 128, 200, 256, 320, 400, 512, 640, 800, 1024, 1280, 1600, 2048]


def _command() -> list[str]:
    exe = shutil.which("kimi-bench")
    return [exe] if exe else [sys.executable, "-m", "kimi_bench.cli.main"]


def _photo(w: int, h: int, mode: str, seed: int) -> Image.Image:
    """A smooth photo-like image (gradients and a little noise: it compresses as photos do)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    chans = [(x / max(1, w - 1)) * 255, (y / max(1, h - 1)) * 255, ((x + y) % 256)]
    arr = np.stack(chans, -1) + rng.normal(0, 3, (h, w, 1))
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    return img.convert(mode) if mode != "RGB" else img


def make_photos(folder: Path) -> list[tuple[int, int, str]]:
    made = []
    for i in range(28):
        side = SIDES[i % len(SIDES)]
        w, h = (side, side * 3 // 4) if i % 3 else (side * 3 // 4 or 64, side)
        made.append((max(64, w), max(64, h), "JPEG" if i % 2 else "PNG", "RGB"))
    made += BIG
    for i, (w, h, fmt, mode) in enumerate(made):
        sub = folder / ("big" if w >= 4000 else f"set{i % 3}")
        sub.mkdir(parents=True, exist_ok=True)
        ext = "jpg" if fmt == "JPEG" else "png"
        _photo(w, h, mode, i).save(sub / f"photo{i:02d}.{ext}", format=fmt, quality=90)
    return [(w, h, fmt) for w, h, fmt, _ in made]


def run_ab(out: Path, *args: str, timeout: int = 1500) -> dict[str, Any]:
    res = subprocess.run([*_command(), "serve-ab", *args, "--out", str(out)],
                         capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def _ledger_count(report: dict, arm: str, stage: str, what: str = "") -> int:
    """Items of ``arm``'s ledger rows of ``stage`` (whose ``mirrors`` text says ``what``)."""
    return sum(c["count"] for c in report["copies"]
               if c["arm"] == arm and c["stage"] == stage and what in c["mirrors"])  # fmt: skip


@pytest.fixture(scope="module")
def folder_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("traffic")
    made = make_photos(root / "photos")
    assert len(made) >= 30 and {f for *_, f in made} == {"JPEG", "PNG"}
    common = ["--images", str(root / "photos"), "--images-per-request", "1-4",
              "--arms", ",".join(ARMS), "--rates", "inf", "--num-prompts", "14",
              "--warmup-requests", "0", "--preset", "kimi-k2.5", "--ranks", "2",
              "--request-timeout", "900", "--seed", "3"]  # fmt: skip
    return {rt: run_ab(root / rt, *common, "--runtime", rt)
            for rt in ("sglang-0.5.23", "pr-33921")}  # fmt: skip


# the two tests below share one module fixture (two serve-ab runs of minutes each): one
# xdist group, so that one worker makes it once (two workers each made it: 430 s twice)
@pytest.mark.xdist_group("serve_traffic_folder")
def test_a_mixed_folder_reports_decisions_bytes_and_ttft_per_size_bucket(
    folder_runs: dict[str, dict],
) -> None:
    for report in folder_runs.values():
        work = report["workload"]
        assert work["source"]["kind"] == "folder" and work["source"]["files"] == 30
        assert set(work["formats"]) == {"jpeg", "png"}
        assert set(work["images_per_request"]) <= {"1", "2", "3", "4"}
        assert "2049+" in work["size_buckets"] and "1-256" in work["size_buckets"]
        for arm in ARMS:
            rows = [r for r in report["by_size"] if r["arm"] == arm]
            assert {r["size_bucket"] for r in rows} == set(work["size_buckets"])
            assert sum(r["images"] for r in rows) == work["images"]
            for r in rows:
                assert r["deferred"] is not None and 0 <= r["deferred"] <= r["images"]
                assert r["raw_bytes"] > 0 and r["fp32_bytes"] > 0 and r["encoded_bytes"] > 0
                assert r["ttft_median_ms"] is None or r["ttft_median_ms"] > 0
            eager = [r for r in rows if arm == "eager"]
            assert all(r["deferred"] == 0 for r in eager)
        # the per-rate rows put the offered rate (none: unlimited) beside the achieved one
        assert all("offered_req_per_s" in r and r["req_per_s"] > 0 for r in report["results"])


@pytest.mark.xdist_group("serve_traffic_folder")
def test_per_image_and_per_request_decisions_differ_on_mixed_requests_in_the_ledger(
    folder_runs: dict[str, dict],
) -> None:
    per_image, per_request = folder_runs["sglang-0.5.23"], folder_runs["pr-33921"]
    big_mixed = [r for r in per_image["requests"] if r["arm"] == "deferred" and r["images"] > 1
                 and any(w * h >= 12_000_000 for w, h, _ in r["image_sizes"])]  # fmt: skip
    assert big_mixed, "the seeded workload puts a 4000x3000 photo beside smaller ones"

    def mixed(report: dict) -> int:
        return sum(r["mixed_requests"] for r in report["by_images_per_request"]
                   if r["arm"] == "deferred")  # fmt: skip

    assert mixed(per_image) > 0 and mixed(per_request) == 0
    deferred_counts = []
    for report in (per_image, per_request):
        deferred = sum(r["deferred"] for r in report["by_size"] if r["arm"] == "deferred")
        images = sum(r["images"] for r in report["by_size"] if r["arm"] == "deferred")
        # the ledger moves each deferred image raw to its owner; each other one is made FP32
        # at the producer (d2h) and moved to its owner as FP32
        assert _ledger_count(report, "deferred", "owner_h2d", "raw uint8") == deferred
        assert _ledger_count(report, "deferred", "d2h") == images - deferred
        assert _ledger_count(report, "deferred", "owner_h2d", "FP32") == images - deferred
        deferred_counts.append(deferred)
    # the request totals (pr-33921) defer the big photo with its small companions; the
    # per-image profile keeps it eager: the two ledgers differ by those images
    assert deferred_counts[0] != deferred_counts[1]


def _chat(*parts: dict, max_tokens: int, timestamp: float) -> str:
    return json.dumps({"model": "any", "max_tokens": max_tokens, "timestamp": timestamp,
                       "messages": [{"role": "user", "content": list(parts)}]})  # fmt: skip


def test_a_jsonl_file_with_url_images_against_the_emulator(tmp_path: Path) -> None:
    photos = tmp_path / "p"
    photos.mkdir()
    _photo(320, 240, "RGB", 1).save(photos / "a.jpg", quality=90)
    datas = [(photos / "a.jpg").read_bytes()]
    limits = [1, 3, 2, 4]
    stamps = [100.0, 100.4, 101.2, 100.8]  # a recorded trace, one line out of time order
    with serve_images([_png_bytes(200, 150)], ["image/png"]) as (url,):
        lines = [
            _chat({"type": "text", "text": "one"}, _img(url), max_tokens=limits[0],
                  timestamp=stamps[0]),
            _chat({"type": "text", "text": "two"}, _img("p/a.jpg"), _img(url),
                  max_tokens=limits[1], timestamp=stamps[1]),
            _chat({"type": "text", "text": "four"}, _img(url), _img("p/a.jpg"), _img(url),
                  max_tokens=limits[3], timestamp=stamps[2]),
            _chat({"type": "text", "text": "three"}, _img("p/a.jpg"), max_tokens=limits[2],
                  timestamp=stamps[3]),
        ]  # fmt: skip
        (tmp_path / "trace.jsonl").write_text("\n".join(lines) + "\n")
        # replayed at its own timestamps (the rate path is every other serve-ab run's)
        report = run_ab(tmp_path / "out", "--requests-file", str(tmp_path / "trace.jsonl"),
                        "--image-transport", "url", "--arms", "eager,deferred",
                        "--replay-timestamps", "--warmup-requests", "0",
                        "--request-timeout", "300")  # fmt: skip
    assert datas[0]  # the file the JSONL names by path
    work = report["workload"]
    assert work["source"]["kind"] == "requests-file" and work["requests"] == 4
    assert work["images"] == 7 and work["distinct_images"] == 2
    rows = sorted(report["requests"], key=lambda r: (r["arm"], r["rid"]))
    assert len(rows) == 8 and all(r["error"] is None for r in rows)
    for arm in ("eager", "deferred"):
        mine = [r for r in rows if r["arm"] == arm]  # in time order
        assert [r["images"] for r in mine] == [1, 2, 1, 3]
        assert [r["scheduled_s"] for r in mine] == pytest.approx([0.0, 0.4, 0.8, 1.2])
        # each line's own max tokens, all generated (the emulator never stops early)
        assert [r["output_tokens"] for r in mine] == limits
        assert all(r["image_tokens"] and r["image_tokens"] > 0 for r in mine)
    assert all(r["stopped_early"] == 0 for r in report["results"])
    assert {r["rate"] for r in report["results"]} == {"2.5"}  # the trace's mean: 3 gaps, 1.2 s


def _img(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def _png_bytes(w: int, h: int) -> bytes:
    import io

    buf = io.BytesIO()
    _photo(w, h, "RGB", 2).save(buf, format="PNG")
    return buf.getvalue()


def test_capacity_mode_reports_each_arms_capacity_and_the_gain(tmp_path: Path) -> None:
    report = run_ab(tmp_path / "cap", "--capacity", "--goodput", "ttft:4000",
                    "--capacity-min-rate", "0.5", "--capacity-max-rate", "8",
                    "--capacity-resolution", "0.5", "--num-prompts", "6",
                    "--warmup-requests", "1", "--image-sizes", "random:64x64-256x256",
                    "--images-per-request", "1-2", "--arms", "eager,deferred")  # fmt: skip
    cap = report["capacity"]
    assert set(cap["arms"]) == {"eager", "deferred"} and cap["baseline"] == "eager"
    for arm, a in cap["arms"].items():
        low, high = a["bracket"]
        met = [p["offered_req_per_s"] for p in a["probes"] if p["met"]]
        failed = [p["offered_req_per_s"] for p in a["probes"] if not p["met"]]
        assert low == (max(met) if met else None) and high == (min(failed) if failed else None)
        assert all(m < f for m in met for f in failed)  # one threshold, bracketed
        if a["status"] == "found":
            assert high - low <= 0.5 * high or str(high)[:3] == str(low)[:3]
        for p in a["probes"]:  # the achieved rate beside the offered one
            assert p["achieved_req_per_s"] > 0 and p["offered_req_per_s"] > 0
        assert any(n.startswith(f"capacity {arm}:") for n in report["notes"])
    gains = cap["gain_pct_vs_baseline"]
    assert set(gains) == {"deferred"}
    for arm, gain in gains.items():
        base, mine = cap["arms"]["eager"]["bracket"][0], cap["arms"][arm]["bracket"][0]
        if base is not None and mine is not None:
            assert gain == pytest.approx((mine / base - 1) * 100)
    assert {r["arm"] for r in report["capacity_rows"]} == {"eager", "deferred"}
    rates = {r["rate"] for r in report["results"]}
    assert len(rates) >= 2 and all(r["offered_req_per_s"] for r in report["results"])


def _rates_on_disk(path: Path) -> int:
    """Per-rate rows in the report on disk so far (0 before the first write)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):  # not written yet
        return 0
    return len(report.get("results") or [])


def test_an_interrupted_capacity_search_keeps_every_probe_it_measured(tmp_path: Path) -> None:
    """Ctrl-C during a capacity search: the report keeps each rate probed so far (a run
    never loses what it measured), says INCOMPLETE, and the command exits 1."""
    out = tmp_path / "cap"
    # 6 requests at 0.2 then 0.4 req/s: each probe's trace lasts seconds (15 s expected at
    # 0.4), so the interrupt sent once the first probe is on disk lands in the second
    cmd = [*_command(), "serve-ab", "--capacity", "--goodput", "ttft:60000", "--arms", "eager",
           "--capacity-min-rate", "0.2", "--capacity-max-rate", "0.4", "--num-prompts", "6",
           "--warmup-requests", "0", "--image-sizes", "64x48:1", "--ranks", "1",
           "--processor-workers", "1", "--out", str(out)]  # fmt: skip
    log = (tmp_path / "serve-ab.log").open("w")  # a file: a pipe nobody reads could fill
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            **popen_kw)  # fmt: skip
    try:
        seen = 0
        while proc.poll() is None and seen == 0:  # the first probe's partial report
            time.sleep(0.5)
            seen = _rates_on_disk(out / "report.json")
        assert seen == 1 and proc.poll() is None, "the search ended before an interrupt"
        proc.send_signal(signal.SIGINT)  # during the second probe's trace
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.returncode == 1, (tmp_path / "serve-ab.log").read_text()[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["final"] is True and report["summary"]["verdict"].startswith("INCOMPLETE")
    # the first probe, judged, with its rows; the interrupted one is no failure
    (probe,) = report["capacity"]["arms"]["eager"]["probes"]
    assert probe["offered_req_per_s"] == 0.2 and probe["completed"] == probe["requests"] == 6
    rows = {r["offered_req_per_s"]: r for r in report["results"]}
    assert rows[0.2]["completed"] == 6 and rows[0.2]["failed"] == 0
    assert rows[0.4]["interrupted"] and rows[0.4]["failed"] == 0
