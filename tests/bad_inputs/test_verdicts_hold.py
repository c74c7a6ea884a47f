"""Issue 42's verdict cases, each through the installed ``kimi-bench`` (a real process, real
files, run from a fresh folder as CI runs it): no plain PASS when no regression check was
made, a baseline's busy host named in the verdict, a faster eager arm is not a deferred
regression, a short history passes saying how many runs it needs, a baseline of the other
eager arm named and refused, calibrate refusing an in-sample or repeated holdout."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import ci_reports
from tests.committed import raw_report

pytestmark = pytest.mark.slow  # each case runs the installed command (seconds each)

KIMI_BENCH = shutil.which("kimi-bench") or str(Path(sys.executable).parent / "kimi-bench")
ROOT = Path(__file__).resolve().parents[2]
QUIET = {"start": None, "end": None, "busy": False, "warning": None}
MD = ("--format", "md")  # the rule table with every reason whole
BUSY_WARNING = "busy host: 1-minute load average 9.0 at end on 2 usable CPUs (test)"


def kb(*args: str | Path, cwd: Path) -> tuple[int, str]:
    """Exit code and everything printed, whitespace removed (rich folds long lines, also
    inside words), of ``kimi-bench ARGS`` run in ``cwd``."""
    env = {**os.environ, "COLUMNS": "400"}
    res = subprocess.run([KIMI_BENCH, *map(str, args)], capture_output=True, text=True,
                         cwd=cwd, env=env, timeout=300, check=False)  # fmt: skip
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, "".join((res.stdout + res.stderr).split())


def flat(text: str) -> str:
    return "".join(text.split())


def _jitter(center: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-0.01, 0.01)) for _ in range(n)]


def micro_run(
    deferred_ms: float,
    eager_ms: float,
    folder: Path,
    *,
    seed: int = 0,
    host: dict[str, Any] | None = None,
    eager_baseline: str | None = None,
) -> Path:
    """A micro report whose deferred repeats sit at ``deferred_ms`` and eager ones at
    ``eager_ms`` (1% jitter); the host-load block set (a quiet host unless ``host``)."""
    deferred = _jitter(deferred_ms, 20, seed)
    ratios = [e / d for e, d in zip(_jitter(eager_ms, 20, seed + 100), deferred, strict=True)]
    raw = ci_reports.micro(deferred, ratios).to_dict()
    raw["environment"]["host_load"] = host or QUIET
    if eager_baseline is not None:
        raw["config"]["eager_baseline"] = eager_baseline
    return ci_reports.put(raw, folder)


# --- no silent pass ---------------------------------------------------------------------------


def test_no_baseline_is_no_regression_check_exit_5_unless_accepted(tmp_path):
    m = micro_run(20.0, 44.0, tmp_path / "m")
    code, out = kb("gate", m, "--rules", "gate", cwd=tmp_path)  # a fresh folder: no baselines
    assert code == 5, out
    assert flat("gate NO REGRESSION CHECK: every regression rule was skipped") in out
    assert flat("no baseline: reports/baselines/cpu does not exist") in out
    assert "gatePASS" not in out
    code, out = kb("gate", m, "--rules", "gate", "--allow-no-baseline", cwd=tmp_path)
    assert code == 0, out
    assert flat("gate PASS with no regression check: no baseline:") in out
    code, out = kb("gate", "--help", cwd=tmp_path)
    assert code == 0 and flat("5 no rule failed but no regression check was made") in out
    assert "--allow-no-baseline" in out


def _gpu_decoded(raw: dict[str, Any], decoder: str) -> dict[str, Any]:
    out = json.loads(json.dumps(raw))
    out["config"]["decoding"] = {"requested": "auto", "decoder": decoder}
    return out


def test_a_gpu_decoded_run_names_the_pil_baseline_it_cannot_use(tmp_path):
    """The default search (reports/baselines/h200 under the current folder) finds only the
    PIL-decoded committed baseline: no regression check, saying which and why."""
    shipped = raw_report(ROOT / "reports/baselines/h200/micro-pil/sglang-0.5.23/r8-shm")
    base = tmp_path / "reports/baselines/h200/micro/r8-shm/report.json"
    base.parent.mkdir(parents=True)
    base.write_text(json.dumps(shipped))
    run = ci_reports.put(_gpu_decoded(shipped, "nvimgcodec"), tmp_path / "run")
    code, out = kb("gate", run, "--rules", "gate-h200", cwd=tmp_path)
    assert code == 5, out
    assert flat("holds no micro report of this setup") in out
    assert flat("decoder 'nvimgcodec' vs 'pil'") in out


def _shipped_rules_setups() -> list[tuple[str, Path]]:
    """(rules name, each committed 8-rank micro baseline it is meant for)."""
    folder = ROOT / "reports/baselines/h200/micro"
    return [("gate-h200", p) for p in sorted(folder.glob("*/r8-*")) if p.is_dir()]


def test_shipped_h200_rules_have_a_baseline_for_a_default_cuda_run(tmp_path):
    """gate-h200 is for 8-rank micro runs on one H200 (its baselines' shape); a default run
    of each such setup (decoder auto: the runtime's GPU decoder on CUDA) must find a
    comparable shipped baseline under reports/baselines/h200, else its regression rule
    never runs. The committed r8 baselines were re-made on an H200 with the runtime's GPU
    decoders (the PIL-decoded ones are under reports/baselines/h200/micro-pil/)."""
    from kimi_bench.domain.runtime import get_profile

    runs, setups = [], _shipped_rules_setups()
    for i, (_, path) in enumerate(setups):
        raw = raw_report(path)
        decoder = get_profile(raw["config"]["runtime"]).decoder
        assert raw["config"]["decoding"]["decoder"] == decoder, path
        runs.append(ci_reports.put(_gpu_decoded(raw, decoder), tmp_path / f"run{i}"))
    assert len(runs) == 4
    code, out = kb("gate", *runs, "--rules", setups[0][0], cwd=ROOT)
    assert code == 0 and "NOREGRESSIONCHECK" not in out and "skip" not in out, out


def test_the_cpu_rules_ship_no_baseline_so_run_accepts_that_in_words(tmp_path):
    """gate.toml is for the default `kimi-bench run` on CPU; no CPU baseline ships (another
    CPU machine's run is not comparable): the default scenario must accept that explicitly,
    so that its gate line says no regression check was made rather than a plain PASS."""
    import tomllib

    assert not (ROOT / "reports/baselines/cpu").exists(), "a CPU baseline ships: gate it"
    scenario = tomllib.loads((ROOT / "scenarios/default.toml").read_text())
    assert scenario["gate"]["rules"] == "gate" and scenario["gate"]["allow_no_baseline"] is True


# --- the baseline's host load -----------------------------------------------------------------


def test_a_busy_baseline_is_named_in_the_verdict(tmp_path):
    busy = {"start": None, "end": None, "busy": True, "warning": BUSY_WARNING}
    base = micro_run(20.0, 44.0, tmp_path / "base", seed=1, host=busy)
    m = micro_run(20.2, 44.0, tmp_path / "m", seed=2)
    code, out = kb("gate", m, "--rules", "gate", "--baseline", base, *MD, cwd=tmp_path)
    assert code == 0, out
    assert flat("compared against a baseline measured on a busy host") in out
    assert flat(BUSY_WARNING) in out  # the baseline's own warning, in the rule's reason
    quiet = micro_run(20.0, 44.0, tmp_path / "quiet", seed=3)
    code, out = kb("gate", m, "--rules", "gate", "--baseline", quiet, cwd=tmp_path)
    assert code == 0 and "busyhost" not in out, out


# --- ratio metrics move only with the measured arm --------------------------------------------


def test_a_faster_eager_arm_is_not_a_deferred_regression(tmp_path):
    """Issue 42's case: speedup 2.17 -> 1.55 while the deferred arm got faster (22.0 ->
    20.6 ms): eager sped up more. A deferred arm 20% slower on the same eager still fails."""
    base = micro_run(22.0, 47.7, tmp_path / "base", seed=1)
    eager_moved = micro_run(20.6, 31.9, tmp_path / "eager-moved", seed=2)
    code, out = kb("gate", eager_moved, "--rules", "gate", "--baseline", base, *MD,
                   cwd=tmp_path)  # fmt: skip
    assert code == 0, out
    assert re.search(r"median2\.1\d\d->1\.5\d\d\(-28\.\d%\)", out), out  # the ratio fell
    assert re.search(r"buttheeagerarm'sowntotal47\.\d+->31\.\d+ms\(p=[^)]+\)gotfaster", out)
    assert flat("did not get slower: the eager arm moved, not a deferred regression") in out
    slower = micro_run(26.4, 47.7, tmp_path / "slower", seed=3)
    code, out = kb("gate", slower, "--rules", "gate", "--baseline", base, *MD, cwd=tmp_path)
    assert code == 1, out
    assert re.search(r"\|baseline\.micro\.speedup\|-0\.1\d+\|fail\|", out), out
    assert "gateFAIL:1of" in out


# --- history ----------------------------------------------------------------------------------


def test_a_short_history_passes_saying_how_many_runs_it_needs(tmp_path):
    hist = tmp_path / "runs.jsonl"
    lines = [{"kind": "micro", "deferred_median_ms": 20.0 + i, "speedup_median": 2.0,
              "git": f"c{i}", "created": f"2026-12-0{i + 1}"} for i in range(2)]  # fmt: skip
    hist.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out = kb("gate", "--history", hist, cwd=tmp_path)
    assert code == 0, out
    assert flat("gate PASS: the history is too short for a change point: 4 more run(s)") in out
    assert "norulewasevaluated" not in out


# --- the other eager arm ----------------------------------------------------------------------


def test_a_baseline_of_the_other_eager_arm_is_named_and_refused(tmp_path):
    base = micro_run(20.0, 44.0, tmp_path / "base", seed=1, eager_baseline="deferral-off")
    m = micro_run(20.1, 44.0, tmp_path / "m", seed=2)
    code, out = kb("gate", m, "--rules", "gate", "--baseline", base, cwd=tmp_path)
    assert code == 2, out
    assert flat("eager baseline (--eager-baseline) 'pre-change' vs 'deferral-off'") in out
    code, out = kb("gate", m, "--rules", "gate", "--baseline", base,
                   "--allow-eager-baseline-mismatch", *MD, cwd=tmp_path)  # fmt: skip
    assert code == 0, out
    named = "differs: this run 'pre-change', the baseline 'deferral-off' (allowed by "
    assert flat(f"eager baseline (--eager-baseline) {named}--allow-eager-baseline-mismatch)") in out
    code, out = kb("compare", base, m, cwd=tmp_path)
    assert code == 0, out
    assert flat("not comparable: eager baseline (--eager-baseline) differs: A 'deferral-off', "
                "B 'pre-change'") in out  # fmt: skip


# --- calibrate's holdout ----------------------------------------------------------------------


def test_calibrate_refuses_an_in_sample_holdout_or_a_folder_twice(tmp_path):
    a = micro_run(20.0, 44.0, tmp_path / "a", seed=1).parent
    b = micro_run(20.1, 44.0, tmp_path / "b", seed=2).parent
    other = micro_run(20.2, 44.0, tmp_path / "other" / "r1", seed=3).parent.parent
    out_dir = tmp_path / "cal"
    code, out = kb("calibrate", "--runs", a, "--runs", b, "--holdout", a, "--out", out_dir,
                   cwd=tmp_path)  # fmt: skip
    assert code == 2, out
    assert flat(f"--holdout {a} holds {a / 'report.json'}, which is also an in-sample run "
                f"(--runs {a})") in out  # fmt: skip
    code, out = kb("calibrate", "--runs", a, "--runs", b, "--holdout", other, "--holdout",
                   f"x={other}", "--out", out_dir, cwd=tmp_path)  # fmt: skip
    assert code == 2, out
    assert flat(f"--holdout {other}:") in out and flat("is already given (--holdout") in out
    code, out = kb("calibrate", "--runs", a, "--runs", a, "--out", out_dir, cwd=tmp_path)
    assert code == 2 and flat(f"--runs {a}:") in out and flat("given twice") in out, out
    assert not out_dir.exists()


# --- serve-ab: one statistic per comparison, a single repeat is a point ------------------------


def test_serve_ab_compares_every_latency_over_one_unit_set_and_one_repeat_is_a_point(tmp_path):
    """At rate inf with one output token, median E2E is median TTFT plus the last token: the
    two comparisons resample the same units (forward batches) and get the same kind of
    verdict; one repeat's throughput delta is a point in the report, its table and the gate."""
    out_dir = tmp_path / "sab"
    code, out = kb("serve-ab", "--device", "cpu", "--rates", "inf", "--requests", "8",
                   "--ranks", "2", "--image-resolution", "64x48", "--images-per-request", "1",
                   "--warmup-requests", "1", "--arms", "eager,deferred", "--max-tokens", "1",
                   "--repeats", "1", "--out", out_dir, cwd=tmp_path)  # fmt: skip
    assert code == 0, out
    ab = json.loads((out_dir / "report.json").read_text())["ab"]["inf"]["deferred"]
    ttft, e2e, thr = ab["median_ttft"], ab["median_e2e"], ab["throughput"]
    assert (ttft["a_units"], ttft["b_units"]) == (e2e["a_units"], e2e["b_units"])
    too_few = "not enough independent samples"
    assert ttft["verdict"].startswith(too_few) == e2e["verdict"].startswith(too_few)
    assert (thr["a_units"], thr["b_units"]) == (1, 1) and thr["interval"]["kind"] == "none"
    md = (out_dir / "report.md").read_text()
    assert not re.search(r"([+-]\d+\.\d%) \.\. \1 \(range\)", md), md  # no one-point "range"
    rules = tmp_path / "thr.toml"
    rules.write_text("[serve_ab.inf]\nmin_throughput_delta = -0.9\n")
    code, out = kb("gate", out_dir, "--rules", rules, *MD, cwd=tmp_path)
    assert code in (0, 1), out
    row = next(x for x in out.split("|serve-ab") if "min_throughput_delta" in x)
    assert "throughputdelta" in row and "interval" not in row.split("|serve")[0], row
