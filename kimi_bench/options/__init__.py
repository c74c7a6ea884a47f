"""Every option of every command, typed, in one place (``base``: names, bounds, machine
defaults; ``parse``: values given as text; ``scenarios``: parity, micro, serve-ab;
``server``: ``kimi-bench serve``; ``commands``: run, gate, compare, render, project,
calibrate, import and the report output). The CLI is generated from these models, scenario
files are validated by them and a report's ``config`` is their dump."""

from kimi_bench.options.base import (
    MACHINE_DEFAULTS,
    MAX_RANKS,
    MAX_RATE,
    MAX_TIMEOUT_S,
    RESOLUTION_PRESETS,
    Arm,
    Carrier,
    Content,
    Device,
    Launcher,
    MicroCarrier,
    OptionsError,
    Preset,
    Runtime,
    describe_error,
    resolve_defaults,
)
from kimi_bench.options.commands import (
    CalibrateOptions,
    CompareOptions,
    GateCommandOptions,
    GateOptions,
    ImportOptions,
    OutputOptions,
    ProjectOptions,
    RenderOptions,
    RunCommandOptions,
    RunOptions,
)
from kimi_bench.options.parse import (
    migrate_image_resolution,
    parse_endpoint,
    parse_image_spec,
    parse_rates,
    parse_resolution,
    rate_label,
)
from kimi_bench.options.scenarios import MicroOptions, ParityOptions, ServeOptions, StandinOptions
from kimi_bench.options.server import EMULATOR_MODEL, ServeCommandOptions

__all__ = [
    "EMULATOR_MODEL", "MACHINE_DEFAULTS", "MAX_RANKS", "MAX_RATE", "MAX_TIMEOUT_S",
    "RESOLUTION_PRESETS", "Arm", "CalibrateOptions", "Carrier", "CompareOptions", "Content",
    "Device", "GateCommandOptions", "GateOptions", "ImportOptions", "Launcher", "MicroCarrier",
    "MicroOptions", "OptionsError", "OutputOptions", "ParityOptions", "Preset",
    "ProjectOptions", "RenderOptions", "RunCommandOptions", "RunOptions", "Runtime",
    "ServeCommandOptions", "ServeOptions", "StandinOptions", "describe_error",
    "migrate_image_resolution", "parse_endpoint", "parse_image_spec", "parse_rates",
    "parse_resolution", "rate_label", "resolve_defaults",
]  # fmt: skip
