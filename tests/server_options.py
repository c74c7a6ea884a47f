"""The HTTP server's and the emulator's settings for tests, built as ``kimi-bench serve``
builds them: from its options model (``ServeCommandOptions``), so a test gets the command's
defaults and can only set what an option sets (issue 20: one configuration path)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kimi_bench.options import EMULATOR_MODEL, ServeCommandOptions
from kimi_bench.serving.admission import ServerOptions

if TYPE_CHECKING:  # the emulator imports torch: not for the many servers that need none
    from kimi_bench.serving.emulator import EmulatorConfig


def server_options(
    model: str = EMULATOR_MODEL,
    *,
    aliases: tuple[str, ...] = (),
    api_key: str | None = None,
    version: str | None = None,
    **options: Any,
) -> ServerOptions:
    """``--served-model-name model`` and ``aliases`` (repeated), the other
    ``ServeCommandOptions`` fields from ``options``; ``api_key`` is the key's value (the CLI
    reads it from ``--api-key-env``); ``version`` stands in for the package's (what
    /version says)."""
    opts = ServeCommandOptions(arm="eager", served_model_name=(model, *aliases), **options)
    made = ServerOptions.from_options(opts, api_key=api_key)
    return made if version is None else dataclasses.replace(made, version=version)


def emulator_config(arm: str, **options: Any) -> EmulatorConfig:
    """``kimi-bench serve --arm arm`` with ``options`` (``ServeCommandOptions`` fields)."""
    from kimi_bench.serving.emulator import EmulatorConfig

    return EmulatorConfig.from_options(ServeCommandOptions(arm=arm, **options))
