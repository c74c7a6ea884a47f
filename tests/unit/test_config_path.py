"""One configuration path (issue 20): every command is generated from a typed options model,
so each option's flag, help text, choices and default come from that model; and each help
text, default and choice name is written once in the source."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import math
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel
from typer.testing import CliRunner

from kimi_bench import options as O
from kimi_bench.bench.serve_http import HttpServeOptions
from kimi_bench.cli.main import app
from kimi_bench.engine.micro_job import MicroJob
from kimi_bench.engine.serve_job import LoadJob, PipelineJob
from kimi_bench.engine.standins import StandinCost
from kimi_bench.options.ab import AbOptions
from kimi_bench.serving.admission import ServerOptions
from kimi_bench.serving.emulator import EmulatorConfig

ROOT = Path(__file__).resolve().parents[2] / "kimi_bench"

# command -> the models its options come from (the output options for commands that write
# a report; serve-ab also takes --scenario, run's scenario parts are separate models)
MODELS: dict[str, tuple[type[BaseModel], ...]] = {
    "parity": (O.ParityOptions, O.OutputOptions),
    "micro": (O.MicroOptions, O.OutputOptions),
    "serve-ab": (O.ServeOptions, O.ScenarioFileOptions, O.OutputOptions),
    "serve": (O.ServeCommandOptions,),
    "run": (O.RunCommandOptions, O.RunOutputOptions),
    "gate": (O.GateCommandOptions,),
    "compare": (O.CompareOptions,),
    "render": (O.RenderOptions,),
    "project": (O.ProjectOptions,),
    "calibrate": (O.CalibrateOptions,),
    "import": (O.ImportOptions,),
    "ab": (AbOptions,),
}
SKIPPED = {("serve-ab", "standins")}  # serve-ab's stand-ins are scenario-file keys only


def _command(name: str) -> Any:
    group: Any = typer.main.get_command(app)
    return group.commands[name]


# hidden commands: serve-ab starts its emulator servers with serve's model written whole
HIDDEN = {O.SERVE_FROM_OPTIONS}


def test_every_command_has_a_model():
    group: Any = typer.main.get_command(app)
    assert {n for n, c in group.commands.items() if not c.hidden} == set(MODELS)
    assert {n for n, c in group.commands.items() if c.hidden} == HIDDEN


@pytest.mark.parametrize("name", sorted(MODELS))
def test_help_is_generated_from_the_model(name: str):
    """Each model field is one parameter of the command, with the field's description as
    its help, its choices listed and its default shown; --help prints them."""
    cmd = _command(name)
    params = {p.name: p for p in cmd.params}
    res = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    screen = " ".join(res.output.split())
    for model in MODELS[name]:
        for field_name, field in model.model_fields.items():
            if (name, field_name) in SKIPPED:
                continue
            assert field_name in params, f"{name}: {field_name} is not an option"
            param = params[field_name]
            text = " ".join((field.description or "").split())
            if param.param_type_name == "argument":
                assert text in screen, (name, field_name)
                continue
            assert param.help.startswith(text), (name, field_name, param.help)
            if getattr(param, "hidden", False):
                assert text.startswith("Tests only"), (name, field_name)
                continue
            assert _squash(text[:60]) in _squash(screen), (name, field_name)
            for choice in _choices(field.annotation):
                assert choice in param.help, (name, field_name, choice)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _choices(annotation: Any) -> list[str]:
    out: list[str] = []
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            out += [str(a) for a in typing.get_args(arg)]
    return out


def _strings() -> list[tuple[str, str]]:
    """Every string constant of the package's modules, with its file (implicitly
    concatenated pieces are one constant in the AST)."""
    out = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append((str(path.relative_to(ROOT)), node.value))
    return out


def _all_models() -> list[type[BaseModel]]:
    seen: dict[str, type[BaseModel]] = {}
    for models in MODELS.values():
        for m in models:
            seen[m.__name__] = m
    seen["StandinOptions"] = O.StandinOptions
    return list(seen.values())


@pytest.mark.slow
def test_each_help_text_is_written_once():
    """A help text (a field's description) appears in the source once: in its model."""
    strings = _strings()
    descriptions = {f.description for m in _all_models() for f in m.model_fields.values()}
    for text in sorted(d for d in descriptions if d and len(d) > 25):
        where = [path for path, s in strings if text in s]
        assert len(where) <= 1, (text, where)
        assert all(p.startswith("options/") for p in where), (text, where)


@pytest.mark.parametrize(
    "literal", [O.Preset, O.Runtime, O.Carrier, O.MicroCarrier, O.Arm, O.Content, O.Launcher]
)
def test_choice_lists_are_not_written_out_elsewhere(literal: Any):
    """A choice list (e.g. ``("shm", "pickle")``) is the model's Literal; no module writes
    the same list again as a tuple, list or set of names."""
    names = set(typing.get_args(literal))
    for rel, lineno, values in _constant_collections():
        if not rel.startswith("options/") and set(values) == names:
            raise AssertionError(f"{rel}:{lineno} writes {sorted(names)} again")


@functools.cache
def _constant_collections() -> tuple[tuple[str, int, tuple[Any, ...]], ...]:
    """Every tuple, list or set of two or more constants in the package's source (parsed
    once for all the parameters above)."""
    out = []
    for path in ROOT.rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
                values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(values) == len(node.elts) and len(values) > 1:
                    out.append((rel, node.lineno, tuple(values)))
    return tuple(out)


def test_defaults_are_not_repeated_in_the_cli():
    """The CLI modules hold no option defaults: their parameters are generated (None means
    "not given", the model fills the rest)."""
    for path in (ROOT / "cli").glob("*.py"):
        if path.name == "main.py":  # the app's own --version, not a command's option
            continue
        text = path.read_text()
        assert not re.search(r"typer\.Option\(\s*\"--", text), f"{path.name} defines an option"


# Job and config objects are built from the options (``from_options``) and hold no defaults
# of their own: a default written there would be a second one, free to drift from the
# option's (serve-ab's emulator start-up already had). Their fault hooks too are given
# where they are built (NO_FAULTS for a real run).
BUILT_FROM_OPTIONS = (EmulatorConfig, ServerOptions, StandinCost, HttpServeOptions)
# the jobs every process of a run is given: built in one place each from the options and
# the run's world (bench.micro_setup.micro_job, bench.launch_runs, serving.emulator)
JOBS = (MicroJob, PipelineJob, LoadJob)
PACKAGES = ("serving", "engine", "bench")


def _defaults(cls: type) -> list[str]:
    return [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]


@pytest.mark.parametrize("cls", BUILT_FROM_OPTIONS, ids=lambda c: c.__name__)
def test_objects_built_from_the_options_hold_no_defaults(cls: type):
    assert isinstance(cls.__dict__.get("from_options"), classmethod), cls
    assert _defaults(cls) == [], f"{cls.__name__} writes defaults of its own"


@pytest.mark.parametrize("cls", JOBS, ids=lambda c: c.__name__)
def test_jobs_hold_no_defaults(cls: type):
    assert _defaults(cls) == [], f"{cls.__name__} writes defaults of its own"


def test_every_class_with_from_options_holds_no_defaults():
    """Also one added later: any dataclass of the packages that run things which is built
    by ``from_options``."""
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).glob("*.py")):
            module = importlib.import_module(f"kimi_bench.{pkg}.{path.stem}")
            for obj in vars(module).values():
                if (
                    isinstance(obj, type)
                    and obj.__module__ == module.__name__
                    and dataclasses.is_dataclass(obj)
                    and "from_options" in obj.__dict__
                ):
                    found.append(obj)
                    assert _defaults(obj) == [], f"{obj.__name__} writes defaults of its own"
    assert set(BUILT_FROM_OPTIONS) <= set(found)


def test_from_options_keeps_every_value():
    """The objects carry the options' values: nothing is dropped on the way."""
    serve = O.ServeCommandOptions(arm="zero-copy", ranks=3, processor_workers=4,
                                  transport="pickle", device="cpu", start_timeout=42,
                                  arena_image="320x200", image_count=2, arena_requests=9,
                                  standins=["text_tokens_per_request=7"], max_pixels=100,
                                  decode_interval_ms=5, max_body_mb=2,
                                  served_model_name=("a", "b"))  # fmt: skip
    conf = EmulatorConfig.from_options(serve)
    job = conf.job("p_", "init")
    assert (job.arm, job.ranks, job.workers, job.transport, job.device) == (
        "zero-copy", 3, 4, "pickle", "cpu"
    )  # fmt: skip
    assert (conf.start_timeout_s, job.arena_image, job.image_count) == (42, (320, 200), 2)
    assert job.arena_requests == 9 and job.cost.text_tokens_per_request == 7
    assert (job.prefix, job.init_file) == ("p_", "init")
    server = ServerOptions.from_options(serve, api_key="k")
    assert (server.served_names, server.api_key, server.decode_interval_s) == (
        ("a", "b"),
        "k",
        0.005,
    )
    assert (server.max_pixels, server.max_request_pixels, server.max_body_bytes) == (
        100, 400, 2 * 2**20
    )  # fmt: skip
    opts = O.ServeOptions(rates="4,inf", requests=3, ranks=2, resolution=(64, 48), seed=5,
                          endpoints=["a=http://x:1/v1"], model="m")  # fmt: skip
    http = HttpServeOptions.from_options(opts, log_dir=None, before_send=None)
    assert (http.rates, http.requests, http.workload.max_size, http.seed) == (
        (4.0, math.inf), 3, (64, 48), 5
    )  # fmt: skip
    assert http.endpoints == (("a", "http://x:1"),) and http.model == "m"
    assert http.emulator is None  # endpoints are not emulated
    emulated = O.ServeOptions(rates="4", requests=3, ranks=2, resolution=(64, 48),
                              images_per_request=2, processor_workers=3, transport="pickle",
                              standins=O.StandinOptions(text_tokens_per_request=7))  # fmt: skip
    em = HttpServeOptions.from_options(emulated, log_dir=None, before_send=None).emulator
    assert em is not None and (em.ranks, em.processor_workers, em.transport) == (2, 3, "pickle")
    assert em.standins.text_tokens_per_request == 7
    assert em.start_timeout == O.SERVE_AB_START_TIMEOUT_S
    assert (em.arena_image, em.image_count, em.arena_requests) == ("64x48", 2, 3 + 4 + 1)


@pytest.mark.parametrize("arms", ["eager,eager", ""])
def test_serve_ab_arms_must_be_given_and_distinct(arms: str):
    with pytest.raises(ValueError, match="arm names must be given and distinct"):
        O.ServeOptions(arms=arms)
