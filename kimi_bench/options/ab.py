"""The options of ``kimi-bench ab``: two revisions, their micro launches, the gate."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from kimi_bench.domain.runtime import get_profile
from kimi_bench.options.base import AB_ARMS, Device, MicroCarrier, Runtime
from kimi_bench.options.commands import _Command


def default_cache() -> Path:
    """$XDG_CACHE_HOME/kimi-bench/revisions (~/.cache/... when unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "kimi-bench" / "revisions"


class AbOptions(_Command):
    cli_flags: ClassVar[dict[str, tuple[str, ...]]] = {"out": ("--output-dir", "--out")}
    base: str = Field(
        description="The reference revision: a git ref of --repo (built into its own "
        "environment, cached by commit) or a kimi-bench executable (a path, or a name on PATH "
        "that is no ref)."
    )
    candidate: str = Field(description="The revision under test, as --base (the same value "
                           "twice is an A/A run).")  # fmt: skip
    launches: int = Field(6, ge=2, le=500, description="Process launches of micro per "
                          "revision (each `micro --launches 1`, unless --micro-args sets it), "
                          "interleaved A B, B A, ...; the interval is over these launch "
                          "pairs.")  # fmt: skip
    max_launches: int | None = Field(
        None,
        ge=2,
        le=500,
        description="While a metric is inconclusive (over --max-regression, but its "
        "interval reaches no change), add one launch pair at a time, up to this many launches "
        "per revision [default: twice --launches; equal to --launches: never add].",
    )
    max_regression: float = Field(0.10, gt=0, le=5.0, allow_inf_nan=False,
                                  description="Allowed regression (0.10: 10%) of the deferred "
                                  "arm's time and of its speedup over eager.")  # fmt: skip
    confidence: float = Field(0.95, ge=0.5, lt=1.0, description="Confidence of the paired "
                              "interval.")  # fmt: skip
    figure: Literal["min", "median"] = Field(
        "min",
        description="A launch's figure for each arm: min (its fastest measured repeat: other "
        "work on the host only ever adds time, so the fastest repeat is the least disturbed) "
        "or median (of its repeats, as micro reports); the speedup is eager's figure over "
        "deferred's.",
    )
    synthetic: str | None = Field(None, description="micro --synthetic (COUNTxWxH,...) "
                                  "[default: micro's].")  # fmt: skip
    ranks: int | None = Field(None, ge=1, le=64, description="micro --ranks [default: micro's "
                              "for the device].")  # fmt: skip
    repeats: int | None = Field(None, ge=1, le=10_000, description="micro --repeats per launch "
                                "[default: micro's].")  # fmt: skip
    warmup: int | None = Field(None, ge=0, le=1_000, description="micro --warmup per launch.")
    control_repeats: int = Field(0, ge=0, le=1_000, description="micro --control-repeats per "
                                 "launch (0: the A/B gates the totals).")  # fmt: skip
    transport: MicroCarrier | None = Field(None, description="micro --transport.")
    runtime: Runtime | None = Field(None, description="micro --runtime (both revisions must "
                                    "know it; one with the eager and deferred arms).")  # fmt: skip
    device: Device = Field("auto", description="micro --device.")
    micro_args: str = Field("", description="More micro options for both revisions, as one "
                            "shell-quoted string.")  # fmt: skip
    repo: Path = Field(Path("."), description="The git repository the refs are read from.")
    cache: Path = Field(default_factory=default_cache, description="Where ref builds are kept, "
                        "one folder per commit [default: $XDG_CACHE_HOME/kimi-bench/"
                        "revisions].")  # fmt: skip
    timeout_s: float = Field(1800.0, gt=0, le=86_400, description="Fail a launch that runs "
                             "longer than this.")  # fmt: skip
    out: Path | None = Field(
        None,
        description="Output folder for report.md, report.json and "
        "each launch's report [default: reports/runs/ab-<timestamp>].",
    )
    overwrite: bool = Field(False, description="Write into an output folder that holds a "
                            "finished A/B report.")  # fmt: skip

    @model_validator(mode="after")
    def _enough(self) -> AbOptions:
        if self.max_launches is not None and self.max_launches < self.launches:
            raise ValueError(f"--max-launches {self.max_launches} is below --launches "
                             f"{self.launches}")  # fmt: skip
        if self.runtime is not None:
            arms = get_profile(self.runtime).arms
            if not set(AB_ARMS) <= set(arms):
                raise ValueError(
                    f"--runtime {self.runtime} has no {' and '.join(AB_ARMS)} arms (its arms: "
                    f"{', '.join(arms)}): ab gates the deferred arm's time and its speedup "
                    "over eager"
                )
        return self

    @property
    def launch_cap(self) -> int:
        """Launches per revision the A/B may reach while a metric is inconclusive."""
        return self.max_launches if self.max_launches is not None else 2 * self.launches

    @field_validator("micro_args")
    @classmethod
    def _split(cls, v: Any) -> Any:
        words = shlex.split(v)  # ValueError on an unclosed quote: a usage error
        banned = {"--output-dir", "--out", "--arms", "--format", "--overwrite", "--runtime"}
        for w in words:
            if w.split("=")[0] in banned:
                raise ValueError(f"{w.split('=')[0]} is set by ab itself")
        return v

    def micro_command(self) -> list[str]:
        """The micro options both revisions run with (not the output folder)."""
        args = ["micro", "--arms", ",".join(AB_ARMS), "--control-repeats",
                str(self.control_repeats), "--device", self.device]  # fmt: skip
        given = {"--synthetic": self.synthetic, "--ranks": self.ranks, "--repeats": self.repeats,
                 "--warmup": self.warmup, "--transport": self.transport,
                 "--runtime": self.runtime}  # fmt: skip
        for flag, value in given.items():
            if value is not None:
                args += [flag, str(value)]
        extra = shlex.split(self.micro_args)
        if not any(w.split("=")[0] == "--launches" for w in extra):
            args += ["--launches", "1"]  # each of the A/B's launches is one process launch
        return args + extra
