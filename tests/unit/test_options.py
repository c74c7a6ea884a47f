"""The typed options: one model per scenario, validated in one place, round-tripped into
the report config, and the shipped JSON Schema in step with the models."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from kimi_bench.bench.micro import build_report as build_micro_report
from kimi_bench.bench.scenario import ScenarioError, load_scenario, with_overrides
from kimi_bench.bench.serve_build import build_serve_report
from kimi_bench.cli.main import app
from kimi_bench.domain.config import get_preset
from kimi_bench.options import (
    MicroOptions,
    ParityOptions,
    ServeOptions,
    parse_resolution,
    resolve_defaults,
)
from kimi_bench.schemas import SCENARIO_SCHEMA, scenario_schema
from tests.committed import committed_reports, raw_report

CPU = torch.device("cpu")


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sc.toml"
    p.write_text(text)
    return p


def test_unknown_key_names_file_table_and_key(tmp_path: Path):
    p = _write(tmp_path, "[micro]\nrepeat = 3\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    msg = str(info.value)
    assert str(p) in msg and "micro.repeat" in msg and "unknown" in msg


def test_wrong_type_names_file_table_and_key(tmp_path: Path):
    p = _write(tmp_path, '[serve_ab]\nranks = "eight"\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    assert str(p) in str(info.value) and "serve_ab.ranks" in str(info.value)
    p = _write(tmp_path, "[parity]\nbatch_size = 2.5\n")
    with pytest.raises(ScenarioError, match=r"parity\.batch_size"):
        load_scenario(p)


def test_unknown_table_is_an_error(tmp_path: Path):
    with pytest.raises(ScenarioError, match=r"unknown table \[paritty\]"):
        load_scenario(_write(tmp_path, "[paritty]\nranks = 2\n"))


def test_run_table_seed_and_device_reach_every_part(tmp_path: Path):
    sc = load_scenario(_write(tmp_path, '[run]\nseed = 7\ndevice = "cpu"\n[micro]\nranks = 3\n'))
    assert sc.micro is not None and (sc.micro.seed, sc.micro.device) == (7, "cpu")
    assert sc.micro.ranks == 3


def test_bounds_are_checked_at_the_boundary():
    for bad in ({"ranks": 1000}, {"rates": "1e308"}, {"rates": "1e-300"},
                {"request_timeout_s": -5}, {"requests": 0}):  # fmt: skip
        with pytest.raises(ValueError):
            ServeOptions.model_validate(bad)
    with pytest.raises(ValueError):
        MicroOptions(timeout_s=-5)


def test_resolution_orders_and_presets():
    """One convention, WIDTHxHEIGHT (PIL's order); sglang's HEIGHTxWIDTH only with hxw:."""
    assert parse_resolution("1920x1080") == (1920, 1080)
    assert parse_resolution("hxw:1080x1920") == (1920, 1080)  # sglang.bench_serving order
    assert parse_resolution("wxh:1920x1080") == (1920, 1080)
    assert parse_resolution("720p") == (1280, 720)
    assert parse_resolution("width=640,height=480") == (640, 480)
    for bad in ("1080", "1080*1920", "0x10", "big", "yxz:10x20", "hxw:"):
        with pytest.raises(ValueError, match="WIDTHxHEIGHT" if bad != "0x10" else "sides"):
            parse_resolution(bad)
    assert ServeOptions(image_resolution="1920x1080").resolution == (1920, 1080)
    assert ServeOptions(image_resolution="hxw:1080x1920").resolution == (1920, 1080)
    assert ServeOptions(resolution="640x480").resolution == (640, 480)  # older spelling
    with pytest.raises(ValueError, match="not both"):
        ServeOptions(image_resolution="1x2", resolution="2x1")


def test_bad_size_names_the_option():
    res = CliRunner().invoke(app, ["serve-ab", "--image-resolution", "480-640"])
    assert res.exit_code == 2
    assert "--image-resolution: bad image resolution '480-640'" in res.output
    assert "hxw:HEIGHTxWIDTH" in res.output


def test_committed_serve_reports_migrate_their_old_size_order():
    """Reports written before the convention was unified hold image_resolution as
    HEIGHTxWIDTH next to resolution [w, h]; re-validating such a config keeps the size
    and spells the old text explicitly (hxw:)."""
    found = 0
    for path in committed_reports():
        rep = raw_report(path)
        if rep["kind"] != "serve-ab":
            continue
        found += 1
        cfg = {k: v for k, v in rep["config"].items() if k in ServeOptions.model_fields}
        cfg["rates"] = rep["config"]["rate_labels"]  # JSON has no inf
        if cfg.get("endpoints"):  # arms are then the endpoints' names, as --endpoint gives them
            del cfg["arms"]
        opts = ServeOptions.model_validate(cfg)
        assert list(opts.resolution or ()) == rep["config"]["resolution"]
        assert opts.width_height == (rep["config"]["width"], rep["config"]["height"])
        old = rep["config"]["image_resolution"]
        if (
            old
            and "x" in old
            and "=" not in old
            and rep["config"]["width"] != rep["config"]["height"]
        ):
            # written before the convention: HEIGHTxWIDTH, kept and spelled explicitly
            w, h = rep["config"]["width"], rep["config"]["height"]
            new = opts.image_resolution
            assert new == ("hxw:" + old if old == f"{h}x{w}" else old)
        else:  # a spelled-out width=..,height=.. means the same in both conventions
            assert opts.image_resolution == old
        # what was given, dumped, validates to the same model (with --endpoint the arms
        # are the endpoints' names and are not given)
        again = ServeOptions.model_validate(opts.model_dump(exclude_unset=True))
        assert again == opts
    assert found >= 3


def test_run_overrides_keep_a_scenarios_endpoints(tmp_path: Path) -> None:
    """``kimi-bench run --seed`` on a scenario whose serve-ab has endpoints: the arms stay
    the endpoints' names (a full dump set the default arms beside them, refused)."""
    path = tmp_path / "ep.toml"
    path.write_text('[serve_ab]\nendpoints = ["a=http://127.0.0.1:9", "b=http://127.0.0.1:8"]\n')
    sc = with_overrides(load_scenario(path), {"seed": 3, "device": "cpu"})
    assert sc.serve_ab is not None and sc.serve_ab.seed == 3 and sc.serve_ab.device == "cpu"
    assert sc.serve_ab.endpoints == ("a=http://127.0.0.1:9", "b=http://127.0.0.1:8")
    assert "arms" not in sc.serve_ab.model_fields_set


def test_old_micro_images_spec_means_synthetic():
    m = MicroOptions.model_validate({"images": "2x640x480"})
    assert m.synthetic == "2x640x480" and m.images is None and m.groups == ((2, 640, 480),)


def test_machine_defaults_profile():
    cpu, profile = resolve_defaults(ServeOptions(), "serve_ab", "cpu")
    assert profile == "cpu" and (cpu.ranks, cpu.requests, cpu.resolution) == (2, 16, (640, 480))
    gpu, profile = resolve_defaults(ServeOptions(), "serve_ab", "cuda")
    assert profile == "cuda" and (gpu.ranks, gpu.requests, gpu.resolution) == (8, 200, (1536, 1024))
    set_by_user, _ = resolve_defaults(ServeOptions(ranks=3), "serve_ab", "cuda")
    assert set_by_user.ranks == 3  # only unset fields take the profile's value


def _assert_round_trip(opts: object, config: dict) -> None:
    # every setting, not the tests' fault seam (which a report has no business recording)
    dumped = opts.model_dump(mode="json", exclude={"fault_hooks"})  # type: ignore[attr-defined]
    assert "fault_hooks" not in config
    if "rates" in dumped:  # unlimited rate is written as null (JSON has no inf)
        dumped["rates"] = [None if math.isinf(r) else r for r in dumped["rates"]]
    for key, value in dumped.items():
        assert key in config, key
        assert config[key] == value, key


def test_every_option_round_trips_into_the_report_config():
    micro = MicroOptions(synthetic="1x32x32", ranks=2, repeats=2, warmup=0, runtime="pr-33921",
                         transport="pickle", notes=("n",), metadata={"k": "v"})  # fmt: skip
    rep = build_micro_report(micro, get_preset("kimi-k3"), CPU, {"eager": [], "deferred": []},
                             {}, "stopped", [])  # fmt: skip
    _assert_round_trip(micro, rep.to_dict()["config"])
    assert rep.environment["metadata"] == {"k": "v"}
    serve = ServeOptions(rates="4,inf", requests=3, ranks=2, image_resolution="64x48")
    srep = build_serve_report(serve, [], CPU, "stopped")
    cfg = srep.to_dict()["config"]
    _assert_round_trip(serve, cfg)
    assert (cfg["width"], cfg["height"]) == (64, 48)


def test_run_uses_every_parity_key(tmp_path: Path):
    """``[parity] batch_size`` and friends reach the parity run (its config says so)."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(3):
        Image.new("RGB", (30 + i, 20), (i, 2, 3)).save(folder / f"{i}.png")
    sc = _write(
        tmp_path,
        f'[parity]\nimages = "{folder}"\nbatch_size = 3\npolicy = "image"\nranks = 3\n'
        'images_per_request = 2\nreference = "none"\n[gate]\nrules = "gate"\n',
    )
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", "--scenario", str(sc), "--output-dir", str(out),
                                   "--device", "cpu", "--seed", "5"])  # fmt: skip
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "parity" / "report.json").read_text())["config"]
    assert (cfg["batch_size"], cfg["policy"], cfg["ranks"]) == (3, "image", 3)
    assert (cfg["images_per_request"], cfg["reference"], cfg["seed"]) == (2, "none", 5)
    assert cfg["device"] == "cpu"


def test_shipped_scenario_schema_is_current_and_validates_builtins():
    import tomllib

    import jsonschema

    schema = scenario_schema()
    assert json.loads(SCENARIO_SCHEMA.read_text()) == json.loads(json.dumps(schema)), (
        "run: python -m kimi_bench.schemas"
    )
    root = Path(__file__).resolve().parents[2] / "scenarios"
    for name in ("default.toml", "serve-ab.toml"):
        jsonschema.validate(tomllib.loads((root / name).read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"micro": {"repeat": 3}}, schema)


def test_help_shows_defaults_from_the_model():
    res = CliRunner().invoke(app, ["parity", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    assert "[default: 4]" in res.output  # --batch-size, from ParityOptions
    res = CliRunner().invoke(app, ["serve-ab", "--help"], env={"COLUMNS": "200"})
    for flag in ("--request-rate", "--num-prompts", "--image-resolution", "--max-concurrency",
                 "--output-dir", "--metadata", "--endpoint"):  # fmt: skip
        assert flag in res.output
    assert "[GPU: 8, CPU: 2]" in res.output
    assert math.isinf(ServeOptions().rates[-1])
    assert ParityOptions().batch_size == 4
