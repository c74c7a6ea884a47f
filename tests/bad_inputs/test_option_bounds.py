"""Every numeric option is bounded: a value out of range, NaN or infinite is a usage error
(exit 2) whose message names the option, before any work, never a traceback or a run that
does not end. Driven through the CLI as a user types it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kimi_bench.cli.main import app

REPO = Path(__file__).resolve().parents[2]
CAL = REPO / "reports" / "baselines" / "h200" / "micro" / "sglang-0.5.23" / "r2-shm"

BAD = [
    # kimi-bench project (hand-written options)
    ("project", "--ranks", "1000000000"),
    ("project", "--ranks", "0"),
    ("project", "--ranks", "8,-4"),
    ("project", "--thread-exponent", "nan"),
    ("project", "--thread-exponent", "inf"),
    ("project", "--thread-exponent", "-1"),
    ("project", "--thread-exponent", "50"),
    ("project", "--loopback-streams", "nan"),
    ("project", "--loopback-streams", "0"),
    ("project", "--loopback-streams", "inf"),
    ("project", "--link-gbps", "nan"),
    ("project", "--link-gbps", "100,inf"),
    ("project", "--link-gbps", "-5"),
    ("project", "--link-gbps", "1e12"),
    ("project", "--gpus-per-node", "0"),
    ("project", "--gpus-per-node", "100000"),
    ("project", "--host-cores", "0"),
    ("project", "--host-cores", "10000000"),
    # kimi-bench parity
    ("parity", "--ranks", "0"),
    ("parity", "--ranks", "65"),
    ("parity", "--batch-size", "0"),
    ("parity", "--max-pixels", "0"),
    ("parity", "--images-per-request", "65"),
    ("parity", "--seed", "-1"),
    # kimi-bench micro
    ("micro", "--repeats", "0"),
    ("micro", "--repeats", "10001"),
    ("micro", "--warmup", "-1"),
    ("micro", "--timeout", "nan"),
    ("micro", "--timeout", "inf"),
    ("micro", "--timeout", "0"),
    ("micro", "--ranks", "1000"),
    ("micro", "--synthetic", "0x64x64"),
    ("micro", "--synthetic", "1x70000x64"),
    # kimi-bench serve-ab
    ("serve-ab", "--request-rate", "nan"),
    ("serve-ab", "--request-rate", "-1"),
    ("serve-ab", "--num-prompts", "0"),
    ("serve-ab", "--burstiness", "nan"),
    ("serve-ab", "--burstiness", "0"),
    ("serve-ab", "--request-timeout", "nan"),
    ("serve-ab", "--request-timeout", "inf"),
    ("serve-ab", "--image-resolution", "0x64"),
    ("serve-ab", "--max-concurrency", "0"),
    ("serve-ab", "--max-tokens", "0"),
    ("serve-ab", "--unique-images", "0"),
    ("serve-ab", "--processor-workers", "65"),
    ("serve-ab", "--repeats", "0"),
    ("serve-ab", "--ranks", "0"),
    # kimi-bench run
    ("run", "--seed", "-1"),
]


@pytest.mark.parametrize(("command", "option", "value"), BAD, ids=lambda v: str(v))
def test_out_of_range_numeric_option_exits_2_naming_it(
    tmp_path: Path, command: str, option: str, value: str
) -> None:
    args = [command, *([str(CAL)] if command == "project" else []), option, value]
    out = tmp_path / "out"
    res = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert option in res.output, res.output
    assert "Traceback" not in res.output
    assert not (out / "report.json").exists()


def test_project_with_a_billion_ranks_is_refused_at_once(tmp_path: Path) -> None:
    """It used to run with no output until killed; the bound refuses it before any work
    (the timeout only guards against a hang, it measures nothing)."""
    res = subprocess.run(
        [sys.executable, "-m", "kimi_bench.cli.main", "project", str(CAL), "--ranks",
         "1000000000", "--out", str(tmp_path / "p")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "--ranks: 1000000000 is out of range (>= 1, <= 16384)" in res.stderr


def test_scenario_resolution_list_is_bounded(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("[serve_ab]\nresolution = [0, 480]\n")
    res = CliRunner().invoke(
        app, ["run", "--scenario", str(scenario), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2, res.output
    assert "resolution" in res.output and "1..65535" in " ".join(res.output.split())


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--ranks", "1000"),
        ("--processor-workers", "0"),
        ("--decode-interval-ms", "nan"),
        ("--decode-interval-ms", "-1"),
        ("--start-timeout", "inf"),
        ("--image-count", "65"),
        ("--arena-requests", "999999"),
        ("--standin", "cpu_flops_scale=nan"),
        ("--standin", "prefill_gflop_per_token=-1"),
    ],
)
def test_kimi_bench_serve_options_are_bounded(option: str, value: str) -> None:
    """``kimi-bench serve`` refuses an out-of-range value before starting anything."""
    res = CliRunner().invoke(app, ["serve", "--arm", "eager", option, value])
    assert res.exit_code == 2, res.output
    assert option in res.output and "Traceback" not in res.output
