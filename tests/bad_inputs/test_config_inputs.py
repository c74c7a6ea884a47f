"""Checkpoint configs and numeric options that must be refused at the boundary, naming
the key (or option) and the file: through ``parity --config`` (exit 2, before any work)
and through the typed options models the commands share (kimi_bench.options)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from kimi_bench.cli.main import app
from kimi_bench.domain.config import ConfigError, load_preprocessor_config
from kimi_bench.infra import limits
from kimi_bench.options import MicroOptions, ServeOptions


def flat(text: str) -> str:
    """Rich wraps long lines, also inside words; compare without any whitespace."""
    return "".join(text.split())


def parity_with(config: Path, tmp_path: Path):
    res = CliRunner().invoke(
        app, ["parity", "--config", str(config), "--device", "cpu", "--out", str(tmp_path / "o")]
    )
    assert "Traceback" not in res.output
    return res


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        ('{"patch_size": 14.9}', "patch_size must be an integer, got 14.9"),
        (
            '{"media_proc_cfg": {"fixed_output_tokens": -3}}',
            "fixed_output_tokens must be within 1..1048576, got -3",
        ),
        ('{"patch_size": 1e999}', "patch_size must be an integer, got inf"),
        ('{"patch_size": 100000}', "patch_size must be within 1..256, got 100000"),
        ('{"in_patch_limit": "16384"}', "in_patch_limit must be an integer, got '16384'"),
        ('{"merge_kernel_size": true}', "merge_kernel_size must be an integer, got True"),
        ('{"image_std": [0.5, 0.5, 0]}', "image_std may not contain 0"),
        (
            '{"image_mean": [0.5, "a", 0.5]}',
            "image_mean must be a finite number or a list of three",
        ),
        ('{"transparent_bg_config": [1]}', "transparent_bg_config must be a JSON object"),
        ('{"patch_size": 1' + "0" * 5000 + "}", "is not valid JSON"),
        ("[" * 100_000, "is not valid JSON"),
    ],
)
def test_bad_config_value_is_refused_at_load_naming_key_and_file(tmp_path, body, cause):
    cfg = tmp_path / "preprocessor_config.json"
    cfg.write_text(body)
    res = parity_with(cfg, tmp_path)
    assert res.exit_code == 2
    assert flat(cause) in flat(res.output) and flat("preprocessor_config.json") in flat(res.output)
    assert not (tmp_path / "o").exists()  # refused before any work


def test_integral_float_is_accepted(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"patch_size": 14.0, "fixed_output_tokens": 64.0}))
    c = load_preprocessor_config(cfg)
    assert (c.patch_size, c.fixed_output_tokens) == (14, 64)
    assert isinstance(c.patch_size, int)


def test_fifo_config_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "c.json")
    with pytest.raises(ConfigError, match=r"c\.json is a FIFO \(named pipe\), not a regular file"):
        load_preprocessor_config(tmp_path / "c.json")


def test_dev_zero_config_is_refused_without_reading():
    with pytest.raises(ConfigError, match="/dev/zero is a character device"):
        load_preprocessor_config("/dev/zero")


def test_oversized_config_is_refused(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"x": "' + "a" * (limits.MAX_CONFIG_BYTES + 10) + '"}')
    with pytest.raises(ConfigError, match=r"larger than 1,048,576 bytes"):
        load_preprocessor_config(cfg)


# --- option bounds (kimi_bench.options, shared by the CLI and scenario files) ------------


@pytest.mark.parametrize(
    ("model", "values", "field", "cause"),
    [
        (MicroOptions, {"ranks": 1000}, "ranks", "less than or equal to 64"),
        (MicroOptions, {"ranks": 2.5}, "ranks", "fractional part"),
        (MicroOptions, {"timeout_s": -5}, "timeout_s", "greater than 0"),
        (ServeOptions, {"rates": "1e308"}, "rates", "bad rate '1e308': between 0.001 and 1e+06"),
        (ServeOptions, {"rates": "1e-300"}, "rates", "bad rate '1e-300': between 0.001"),
        (ServeOptions, {"rates": "nan"}, "rates", "bad rate 'nan'"),
        (ServeOptions, {"request_timeout_s": -1}, "request_timeout_s", "greater than 0"),
    ],
)
def test_option_out_of_bounds_names_the_option(model, values, field, cause):
    with pytest.raises(ValidationError) as info:
        model(**values)
    (err,) = info.value.errors()
    assert err["loc"] == (field,) and cause in err["msg"]
