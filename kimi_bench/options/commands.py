"""The options of the commands that run no scenario of their own (``gate``, ``compare``,
``render``, ``project``, ``calibrate``, ``import``), of ``run`` and of the report output
every measuring command shares. As for the scenarios: each default, choice and help text is
written once, here; the CLI generates the commands from these models (``cli.build``).
``cli_arguments`` names the fields given as positional arguments, ``cli_flags`` the fields
whose flags differ from ``--field-name``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from kimi_bench.infra.limits import (
    MAX_GPUS_PER_NODE,
    MAX_HOST_CORES,
    MAX_LINK_GBPS,
    MAX_LOOPBACK_STREAMS,
    MAX_PROJECT_RANKS,
    MAX_THREAD_EXPONENT,
)
from kimi_bench.options.base import Device, _Options
from kimi_bench.options.scenarios import MicroOptions, ParityOptions
from kimi_bench.options.serve_ab import ServeOptions

PeerFormat = Literal["auto", "sglang", "vllm", "guidellm", "aiperf"]
ConsoleFormat = Literal["table", "md", "json"]


class _Command(_Options):
    cli_arguments: ClassVar[tuple[str, ...]] = ()
    cli_flags: ClassVar[dict[str, tuple[str, ...]]] = {}
    cli_repeatable: ClassVar[tuple[str, ...]] = ()


class GateOptions(_Options):
    """The gate part of a scenario file (``[gate]``)."""

    rules: str = Field("gate", description="Rules TOML: a path or a built-in name (gate, "
                       "gate-h200).")  # fmt: skip
    baseline: str | None = Field(
        None,
        description="Baseline report or folder. Given: it must exist and hold a report of the "
        "same kind and setup (else exit 2), and baseline rules can never be skipped. Not "
        "given: reports/baselines/<device>/ is searched when present.",
    )
    allow_no_baseline: bool = Field(
        True,
        description="kimi-bench run: accept that no comparable baseline is found (no CPU "
        "baseline ships): the run passes, its gate line saying no regression check was made "
        "and why; false: exit 5 as gate does.",
    )
    allow_eager_baseline_mismatch: bool = Field(
        False,
        description="Accept a baseline made with the other eager arm (--eager-baseline): "
        "used, and named in each rule's reason (without this: not comparable; a --baseline "
        "of the other eager arm is exit 2).",
    )


class RunOptions(_Options):
    """A scenario file (``kimi-bench run --scenario``): one table per part."""

    description: str = Field("", description="What this scenario is for.")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed for every part.")
    device: Device = Field("auto", description="Device for every part.")
    parity: ParityOptions | None = None
    micro: MicroOptions | None = None
    serve_ab: ServeOptions | None = None
    gate: GateOptions = Field(default_factory=GateOptions)  # type: ignore[arg-type]


class OutputOptions(_Command):
    """Where a measuring command writes its report and how it prints its tables."""

    cli_flags: ClassVar[dict[str, tuple[str, ...]]] = {"out": ("--out", "--output-dir")}
    out: Path | None = Field(
        None,
        description="Output folder for report.json, report.md, report.html, CSV and figures "
        "[default: reports/runs/<kind>-<timestamp>]. One run holds it at a time (another run "
        "given it exits 2); a folder with a finished report is refused unless --overwrite.",
    )
    format: ConsoleFormat = Field(
        "table", description="Console tables as table, md or json (json: stdout is one JSON "
        "document and every message goes to stderr)."
    )  # fmt: skip
    append_jsonl: Path | None = Field(
        None,
        description="Append one line with this run's summary (kind, commit, device, verdict, "
        "key numbers) to FILE, for dashboards.",
    )
    overwrite: bool = Field(
        False, description="Write into an output folder that holds a finished report, "
        "replacing its files."
    )  # fmt: skip


class RunOutputOptions(OutputOptions):
    """``kimi-bench run``'s output folder: a folder per part, the gate and an index."""

    out: Path | None = Field(
        None,
        description="Output folder: parity/, micro/ and serve-ab/ (each a full report), "
        "gate.md, gate.xml, index.md and index.html [default: "
        "reports/runs/run-<timestamp>]. One run holds it at a time (another run given it "
        "exits 2); a folder with a finished run is refused unless --overwrite.",
    )


class ScenarioFileOptions(_Command):
    """``serve-ab --scenario``: a scenario file's table as the defaults of one command."""

    scenario: str | None = Field(
        None,
        description="Scenario TOML whose [serve_ab] table sets the options (a built-in name "
        "such as serve-ab for the PR shape, or a path); command-line options override it.",
    )


class RunCommandOptions(_Command):
    scenario: str = Field("default", description="Scenario: a built-in name or a TOML path.")
    seed: int | None = Field(None, ge=0, le=2**32 - 1, description="Seed for every part "
                             "(overrides the scenario).")  # fmt: skip
    device: Device | None = Field(None, description="Device for every part (overrides the "
                                  "scenario).")  # fmt: skip


class GateCommandOptions(GateOptions, _Command):
    cli_arguments: ClassVar[tuple[str, ...]] = ("reports",)
    reports: tuple[Path, ...] = Field((), description="report.json files or folders.")
    allow_no_baseline: bool = Field(
        False,
        description="Accept a gate whose regression (baseline) rules all skipped for want of "
        "a comparable baseline: it passes, its verdict saying no regression check was made "
        "and why (without this: exit 5).",
    )
    history: Path | None = Field(
        None,
        description="A run history (--append-jsonl FILE): fail when the newest runs start a "
        "significant regression (change-point detection), naming the first bad commit.",
    )
    junit: str | None = Field(None, description="Write JUnit XML here.")
    format: ConsoleFormat = Field(
        "table", description="The rule table as table, md or json (json: stdout is one JSON "
        "document, the verdict and every message go to stderr)."
    )  # fmt: skip
    summary: str | None = Field(
        None,
        description="Write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY; an empty value, such "
        "as an unset variable, writes none).",
    )


class CompareOptions(_Command):
    cli_arguments: ClassVar[tuple[str, ...]] = ("a", "b")
    a: Path = Field(description="Report A (the reference).")
    b: Path = Field(description="Report B (the candidate).")
    markdown: str | None = Field(None, description="Also write the table as Markdown here.")
    format: ConsoleFormat = Field(
        "table", description="The table as table, md or json (json: stdout is one JSON "
        "document, every message goes to stderr)."
    )  # fmt: skip


class RenderOptions(_Command):
    cli_arguments: ClassVar[tuple[str, ...]] = ("paths",)
    paths: tuple[Path, ...] = Field(
        min_length=1,
        description="report.json files or folders; every report.json below a folder is used.",
    )
    html: Path | None = Field(
        None, description="Also write one HTML page with all these reports (figures embedded)."
    )


def _numbers(value: Any, kind: type, low: float, high: float, low_open: bool) -> Any:
    """``"16,32,64"`` -> (16, 32, 64), each finite and within (or at) the bounds."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        numbers = tuple(kind(str(p).strip()) for p in parts if str(p).strip())
    except ValueError:
        raise ValueError(f"comma-separated numbers expected, got {value!r}") from None
    if not numbers:
        raise ValueError("at least one value is needed")
    for v in numbers:
        if not math.isfinite(v) or v > high or v < low or (low_open and v == low):
            side = ">" if low_open else ">="
            raise ValueError(f"{v} is out of range ({side} {low:g}, <= {high:g})")
    return numbers


class ProjectOptions(_Command):
    cli_arguments: ClassVar[tuple[str, ...]] = ("reports",)
    cli_flags: ClassVar[dict[str, tuple[str, ...]]] = {
        "out": ("--out", "--output-dir"),
        "validate_": ("--validate",),
    }
    cli_repeatable: ClassVar[tuple[str, ...]] = ("validate_",)
    reports: tuple[Path, ...] = Field(
        min_length=1,
        description="micro report(s) to calibrate on (report.json or its folder), one per "
        "carrier (shm, pickle).",
    )
    ranks: tuple[int, ...] = Field(
        (16, 32, 64),
        description=f"Rank counts to project, comma-separated (1..{MAX_PROJECT_RANKS}).",
    )
    link_gbps: tuple[float, ...] = Field(
        (100.0,),
        description="Link speed between nodes in Gbit/s (what gloo's TCP traffic gets), "
        f"comma-separated for several (> 0, <= {MAX_LINK_GBPS:g}).",
    )
    gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE, description="GPUs (= ranks, "
                               "one per GPU) per node.")  # fmt: skip
    validate_: tuple[Path, ...] = Field(
        (),
        validation_alias="validate",
        description="A measured micro report at another rank count on the calibration's host "
        "(repeatable): adds the prediction error table.",
    )
    host_cores: int | None = Field(
        None, ge=1, le=MAX_HOST_CORES, description="CPU cores per node when the calibration "
        "report does not record them (micro splits them between its processes).",
    )  # fmt: skip
    thread_exponent: float = Field(
        0.65, ge=0, le=MAX_THREAD_EXPONENT, allow_inf_nan=False,
        description=f"A host copy with T threads takes T^-x as long (0..{MAX_THREAD_EXPONENT:g}).",
    )  # fmt: skip
    host_probe: Path | None = Field(
        None, description="Host-copy probe JSON (reports/projection/host-probe/copy_probe.py): "
        "how each torch copy op scales with micro's thread split on the calibration host "
        "[default: the packaged H200 probe; used when the host's core count matches, else "
        "--thread-exponent].",
    )  # fmt: skip
    loopback_streams: float = Field(
        1.7, gt=0, le=MAX_LOOPBACK_STREAMS, allow_inf_nan=False,
        description="Concurrent gloo transfers one node carries at full speed "
        f"(> 0, <= {MAX_LOOPBACK_STREAMS:g}).",
    )  # fmt: skip
    out: Path | None = Field(None, description="Output folder [default: "
                             "reports/runs/project-<timestamp>].")  # fmt: skip
    overwrite: bool = Field(False, description="Write into an --out folder that holds a "
                            "finished report.")  # fmt: skip

    @field_validator("ranks", mode="before")
    @classmethod
    def _ranks(cls, v: Any) -> Any:
        return _numbers(v, int, 1, MAX_PROJECT_RANKS, False)

    @field_validator("link_gbps", mode="before")
    @classmethod
    def _links(cls, v: Any) -> Any:
        return _numbers(v, float, 0, MAX_LINK_GBPS, True)


class CalibrateOptions(_Command):
    cli_flags: ClassVar[dict[str, tuple[str, ...]]] = {"out": ("--output-dir", "--out")}
    cli_repeatable: ClassVar[tuple[str, ...]] = ("runs", "holdout")
    scenario: str = Field("calibrate", description="Scenario to run (built-in name or TOML "
                          "path); the built-in calibrate is the default scenario without "
                          "parity.")  # fmt: skip
    pairs: int = Field(20, ge=2, le=200, description="A/A pairs (2 runs each).")
    slowdown: float = Field(0.20, ge=0.01, le=5.0, description="Injected slowdown of the "
                            "deferred arm.")  # fmt: skip
    target: float = Field(0.01, ge=0.0, le=0.5, description="Largest A/A false-failure rate "
                          "in sample (chooses each metric's threshold).")  # fmt: skip
    oos_target: float = Field(0.05, ge=0.0, le=0.5, description="Largest A/A false-failure "
                              "rate out of sample (a target the report checks).")  # fmt: skip
    power: float = Field(0.95, gt=0.0, le=1.0, description="Smallest detection rate of the "
                         "injected slowdown out of sample (a target the report "
                         "checks).")  # fmt: skip
    rules: str = Field("gate", description="Rules to calibrate (built-in name or TOML path).")
    runs: tuple[Path, ...] = Field(
        (), description="Use these earlier run folders of ONE machine (A, B, A, B, ...; runs of "
        "one setup are paired in order) instead of running the scenario (repeatable; at "
        "least 2).",
    )  # fmt: skip
    holdout: tuple[Path, ...] = Field(
        (), description="A folder of runs from ANOTHER machine (repeatable; LABEL=DIR puts "
        "several folders under one machine, else each folder is one): the in-sample "
        "thresholds are scored, unchanged, on every pair of runs of one setup from two "
        "different machines (out of sample).",
    )  # fmt: skip
    device: Device | None = Field(None, description="Device for every run.")
    out: Path | None = Field(None, description="Folder for the runs and the calibration "
                             "[default: reports/runs/calibrate-<timestamp>].")  # fmt: skip


class ImportOptions(_Command):
    cli_arguments: ClassVar[tuple[str, ...]] = ("files",)
    # --tool says what --format means here (the tool that wrote the files, not how tables
    # print, as --format does elsewhere); --format stays for scripts that use it
    cli_flags: ClassVar[dict[str, tuple[str, ...]]] = {
        "out": ("--output-dir", "--out"),
        "format": ("--tool", "--format"),
    }
    cli_repeatable: ClassVar[tuple[str, ...]] = ("arm",)
    files: tuple[Path, ...] = Field(min_length=1, description="Result files, one per arm.")
    format: PeerFormat = Field("auto", description="The tool that wrote the files.")
    arm: tuple[str, ...] = Field((), description="Arm name of each file, in order "
                                 "[default: the file stem].")  # fmt: skip
    tool_version: str | None = Field(None, description="The tool's version, when its file "
                                     "lacks it.")  # fmt: skip
    out: Path | None = Field(None, description="Report folder [default: "
                             "reports/runs/import-<timestamp>].")  # fmt: skip
