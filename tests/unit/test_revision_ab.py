"""``kimi-bench ab`` without torch: the paired statistic (``ci.ab_stats``), the launch
order, the refusals (exit 2 naming the revision) and the whole command driven with stand-in
executables that answer ``--version`` and write a micro report.json with set figures (the
real micro launches are in tests/integration/test_revision_ab.py)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from scipy import stats
from typer.testing import CliRunner

from kimi_bench.ci.ab_stats import launch_order, paired_change
from kimi_bench.ci.revisions import RevisionError, resolve, resolve_commit
from kimi_bench.cli.main import app
from tests.faults import SlowerArm

REPO = Path(__file__).resolve().parents[2]


def test_the_interval_is_the_paired_t_interval_of_the_log_ratios():
    base = [10.0, 11.0, 9.5, 10.4, 10.1]
    cand = [12.3, 13.1, 11.2, 12.6, 12.0]
    got = paired_change("deferred_ms", base, cand, better="lower", threshold=0.10)
    logs = [math.log(c / b) for b, c in zip(base, cand, strict=True)]
    n, mean, sd = len(logs), sum(logs) / len(logs), stats.tstd(logs)
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    assert got.estimate == pytest.approx(math.expm1(mean))
    assert (got.low, got.high) == pytest.approx((math.expm1(mean - half), math.expm1(mean + half)))
    assert got.n_pairs == 5 and got.verdict == "regression" and got.low > 0.10
    assert got.pair_changes == pytest.approx(
        tuple(c / b - 1 for b, c in zip(base, cand, strict=True))
    )


def test_higher_is_better_metrics_count_a_smaller_candidate_as_worse():
    got = paired_change("speedup", [2.0, 2.1, 1.9], [1.6, 1.7, 1.5], better="higher",
                        threshold=0.10)  # fmt: skip
    assert got.estimate > 0.2 and got.verdict == "regression"
    assert "speedup: +" in got.sentence and "REGRESSION" in got.sentence


def test_verdicts_need_size_and_significance():
    same = paired_change("deferred_ms", [10, 11, 9], [10.2, 10.9, 9.1], better="lower",
                         threshold=0.10)  # fmt: skip
    assert same.verdict == "ok" and same.low < 0 < same.high
    # over the threshold on average, but one pair says the opposite: not decided
    wide = paired_change("deferred_ms", [10, 10, 10], [14, 9.5, 14], better="lower",
                         threshold=0.10)  # fmt: skip
    assert wide.estimate > 0.10 and wide.low < 0 and wide.verdict == "inconclusive"
    better = paired_change("deferred_ms", [10, 10.5, 9.8], [7, 7.4, 6.9], better="lower",
                           threshold=0.10)  # fmt: skip
    assert better.verdict == "improvement"
    flat = paired_change("deferred_ms", [10, 20], [12, 24], better="lower", threshold=0.1)
    assert (flat.low, flat.high, flat.p_value) == pytest.approx((0.2, 0.2, None))


@pytest.mark.parametrize(
    ("base", "cand", "says"),
    [([10.0], [11.0], "at least 2 launch pairs"), ([10.0, 9.0], [11.0], "1 candidate"),
     ([10.0, 0.0], [11.0, 1.0], "finite and > 0")],
)  # fmt: skip
def test_unusable_figures_are_refused(base: list[float], cand: list[float], says: str):
    with pytest.raises(ValueError, match=says):
        paired_change("deferred_ms", base, cand, better="lower", threshold=0.1)


def test_launches_alternate_so_that_drift_hits_both_sides():
    order = launch_order(3)
    assert [s[0] for _, s in order] == list("bccbbc")
    assert [p for p, _ in order] == [0, 0, 1, 1, 2, 2]


def test_the_same_ref_twice_is_one_commit_and_an_unknown_ref_is_named(tmp_path: Path):
    head = resolve_commit(REPO, "HEAD")
    assert head is not None and len(head) == 40 and resolve_commit(REPO, head) == head
    with pytest.raises(RevisionError, match="--candidate no-such-ref-x9: neither a git ref"):
        resolve("candidate", "no-such-ref-x9", REPO, tmp_path)
    with pytest.raises(RevisionError, match=f"--base {tmp_path}/nope: no such executable"):
        resolve("base", str(tmp_path / "nope"), REPO, tmp_path)


def test_the_slower_build_stretches_the_stage_inside_the_measured_region():
    class Clock:
        def __init__(self) -> None:
            self.marks: dict[str, float] = {}

        def mark(self, stage: str) -> None:
            self.marks[stage] = time.perf_counter()

    hooks = SlowerArm(fraction=0.5)
    assert hooks.clock("eager", 0, inner := Clock()) is inner  # other arms: untouched
    assert hooks.clock("deferred", None, inner) is inner  # the producer: untouched
    wrapped = hooks.clock("deferred", 1, Clock())
    t0 = wrapped.t0
    time.sleep(0.02)
    wrapped.mark("owner_h2d")
    wrapped.mark("owner_materialize")
    m = wrapped.marks
    # the stage ends after the extra work: at least half the time so far again
    assert m["owner_materialize"] - t0 >= 1.5 * (m["owner_h2d"] - t0)
    with pytest.raises(ValueError, match="fraction"):
        SlowerArm(fraction=0)


FAKE = """#!/bin/sh
# a stand-in kimi-bench (no Python start-up): --version, and micro writing a report.json
# with set figures, a little spread between launches
if [ "$1" = "--version" ]; then echo "kimi-bench {version}"; exit 0; fi
[ "$1" = micro ] || exit 9
while [ $# -gt 0 ]; do [ "$1" = --output-dir ] && out=$2; shift; done
n=$(cat "$0.count" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.count"
deferred=$(awk -v n="$n" 'BEGIN {{ printf "%.6f", {deferred} * {factor} }}')
eager=$(awk 'BEGIN {{ printf "%.6f", 20 * {eager} }}')
speedup=$(awk -v d="$deferred" -v e="$eager" 'BEGIN {{ printf "%.6f", e / d }}')
slow=$(awk -v d="$deferred" 'BEGIN {{ printf "%.6f", 1.5 * d }}')
mkdir -p "$out"
cat > "$out/report.json" <<JSON
{{"summary": {{"deferred_median_ms": $slow, "eager_median_ms": 30.0,
  "speedup_median": $speedup, "repeats_completed": 5, "bit_exact_all_repeats": true}},
 "arms": {{"deferred": {{"total_ms": {{"samples": [$slow, $deferred, $slow]}}}},
  "eager": {{"total_ms": {{"samples": [30.0, $eager, 25.0]}}}}}},
 "environment": {{"git": {{"commit": "{commit}"}}, "package_version": "{version}",
  "device": "cpu", "device_name": "x86_64", "cpu_count": 2, "torch": "t", "python": "p",
  "host_load": {{"start": {{"load_1m": 1.5}}}}}}}}
JSON
exit {code}
"""


def _fake(
    path: Path,
    deferred: float,
    commit: str,
    code: int = 0,
    version: str = "9.9",
    factor: str = "(1 + 0.01 * (n % 3))",  # awk, of the launch's number n from 0
    eager: float = 1.0,  # the eager arm's fastest repeat: 20 ms times this
) -> str:
    path.write_text(FAKE.format(deferred=deferred, commit=commit, code=code, version=version,
                                factor=factor, eager=eager))  # fmt: skip
    path.chmod(0o755)
    return str(path)


def _ab(tmp_path: Path, base: str, cand: str, *more: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["ab", "--base", base, "--candidate", cand, "--launches",
                                   "3", "--out", str(tmp_path / "out"), *more])  # fmt: skip
    return res.exit_code, res.output


def test_an_aa_run_passes_and_names_the_commit_machine_and_launches(tmp_path: Path):
    exe = _fake(tmp_path / "kb", 10.0, "a" * 40)
    code, out = _ab(tmp_path, exe, exe)
    assert code == 0, out
    assert "ab PASS" in out and "[6/6] " in out and "left)" in out  # progress, launch by launch
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["base"]["commit"] == doc["candidate"]["commit"] == "a" * 40
    assert doc["base"]["version"] == "kimi-bench 9.9"
    assert [la["side"][0] for la in doc["launches"]] == list("bccbbc")
    assert [m["verdict"] for m in doc["metrics"]] == ["ok", "ok"]
    # each arm's figure: its fastest repeat (the report's medians are 1.5x and 30 ms)
    assert [la["deferred_ms"] for la in doc["launches"]][:3] == pytest.approx([10, 10.1, 10.2])
    assert doc["launches"][0]["speedup"] == pytest.approx(2.0)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "# kimi-bench ab: PASS" in md and "a" * 12 in md and "host load" in md


def test_a_slower_candidate_fails_with_exit_1_naming_the_metric(tmp_path: Path):
    base = _fake(tmp_path / "base", 10.0, "a" * 40)
    cand = _fake(tmp_path / "cand", 12.0, "b" * 40)
    code, out = _ab(tmp_path, base, cand)
    assert code == 1, out
    assert "ab FAIL: regression in deferred_ms, speedup" in out
    assert "deferred_ms: +20.0%" in out
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (doc["base"]["commit"], doc["candidate"]["commit"]) == ("a" * 40, "b" * 40)
    assert doc["exit_code"] == 1 and doc["verdict"] == "FAIL"


def test_an_inconclusive_metric_adds_launch_pairs_up_to_max_launches(tmp_path: Path):
    """A candidate 20% slower whose second launch was disturbed (3x): after 3 pairs the
    interval reaches no change; pairs are added one at a time while it does, up to twice
    --launches by default (then it stays inconclusive, exit 0, named), and with a higher
    --max-launches until the interval excludes no change (exit 1)."""
    base = _fake(tmp_path / "base", 10.0, "a" * 40)
    disturbed = "(n == 1 ? 3.6 : 1.2)"
    cand = _fake(tmp_path / "cand", 10.0, "b" * 40, factor=disturbed)
    code, out = _ab(tmp_path, base, cand)
    assert code == 0, out
    assert "[12/12] " in out and "up to 12 while a metric is inconclusive" in out
    assert "ab PASS (inconclusive: deferred_ms, speedup after 6 launch pairs" in out
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(doc["launches"]) == 12 and doc["settings"]["launches_asked"] == 3
    assert (
        "asked 3; pairs added while a metric was inconclusive, up to 6"
        in (tmp_path / "out" / "report.md").read_text()
    )
    for f in tmp_path.glob("*.count"):
        f.unlink()
    code, out = _ab(tmp_path, base, cand, "--max-launches", "20", "--overwrite")
    assert code == 1, out
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    pairs = doc["settings"]["launches_per_revision"]
    assert 6 < pairs < 20 and len(doc["launches"]) == 2 * pairs
    assert "ab FAIL: regression in" in out
    code, out = _ab(tmp_path, base, cand, "--max-launches", "2", "--overwrite")
    assert code == 2 and "--max-launches 2 is below --launches 3" in out


def test_a_slower_eager_in_the_base_is_not_a_deferred_regression(tmp_path: Path):
    """The base's eager arm 25% slower (its fastest repeat 25 ms, not 20), the deferred arms alike:
    the candidate's speedup is smaller beyond the threshold and significantly so, but its
    deferred arm did not get slower, so the A/B passes and says the eager arm moved."""
    base = _fake(tmp_path / "base", 10.0, "a" * 40, eager=1.3)
    cand = _fake(tmp_path / "cand", 10.0, "b" * 40)
    code, out = _ab(tmp_path, base, cand)
    assert code == 0, out
    assert "speedup: +25.0%" in out and "the eager arm moved, not a deferred regression" in out
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [m["verdict"] for m in doc["metrics"]] == ["ok", "eager moved"]
    assert len(doc["launches"]) == 6  # nothing inconclusive: no pair added
    # the same eager change with a deferred arm 20% slower: both fail
    slow = _fake(tmp_path / "slow", 12.0, "c" * 40)
    code, out = _ab(tmp_path, base, slow, "--overwrite")
    assert code == 1 and "ab FAIL: regression in deferred_ms, speedup" in out, out


@pytest.mark.parametrize(("side", "code"), [("base", 2), ("candidate", 1)])
def test_a_failed_launch_is_refused_or_failed_by_side(tmp_path: Path, side: str, code: int):
    good = _fake(tmp_path / "good", 10.0, "a" * 40)
    bad = _fake(tmp_path / "bad", 10.0, "b" * 40, code=1)
    got, out = _ab(tmp_path, bad if side == "base" else good, bad if side != "base" else good)
    assert got == code, out
    assert f"{side} launch" in out and "exited 1" in out


def test_refusals_exit_2_naming_the_revision(tmp_path: Path):
    exe = _fake(tmp_path / "kb", 10.0, "a" * 40)
    code, out = _ab(tmp_path, "no-such-ref-x9", exe)
    assert code == 2 and "--base no-such-ref-x9: neither a git ref" in out
    code, out = _ab(tmp_path, exe, str(tmp_path / "missing"))
    assert code == 2 and f"--candidate {tmp_path / 'missing'}: no such executable" in out
    code, out = _ab(tmp_path, exe, "/bin/true")
    assert code == 2 and "--candidate /bin/true: `--version` did not answer as kimi-bench" in out
    code, out = _ab(tmp_path, exe, exe, "--micro-args", "--arms eager")
    assert code == 2 and "--arms is set by ab itself" in out
    code, out = _ab(tmp_path, exe, exe, "--launches", "1")
    assert code == 2 and "launches" in out
    code, out = _ab(tmp_path, exe, exe, "--runtime", "vllm-0.33")  # before any launch
    assert code == 2 and "--runtime vllm-0.33 has no eager and deferred arms" in out
    assert not (tmp_path / "out" / "launches").exists()
    code, out = _ab(tmp_path, exe, exe, "--micro-args", "--runtime vllm-0.33")
    assert code == 2 and "--runtime is set by ab itself" in out


def test_help_documents_the_exit_codes():
    out = CliRunner().invoke(app, ["ab", "--help"]).output
    assert "0 no regression" in out and "1 a regression" in out and "2 refused" in out
    assert "scipy.stats.ttest_1samp" in out  # which interval


def test_launches_make_no_figures(monkeypatch: pytest.MonkeyPatch):
    from kimi_bench.ci.ab import LAUNCH_ENV
    from kimi_bench.report.figbase import pyplot

    for key, value in LAUNCH_ENV.items():
        monkeypatch.setenv(key, value)
    assert pyplot() is None  # figures skipped, as without matplotlib
