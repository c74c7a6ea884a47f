"""The fault seams (``kimi_bench.infra.fault_hooks``): a ``--fault-hooks`` spec loads a class
from ``tests/faults.py`` with its arguments, a bad one is refused, the hooks pickle (they
travel to worker processes), the option stays hidden, serve-ab hands it on to its emulator
servers, and the SSE stream ends as each broken-stream hook says."""

from __future__ import annotations

import asyncio
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from kimi_bench.bench.serve_http import HttpServeOptions, emulator_command
from kimi_bench.cli.main import app
from kimi_bench.infra.fault_hooks import NO_FAULTS, FaultHooks, load_hooks
from kimi_bench.options import MicroOptions, ServeCommandOptions, ServeOptions
from kimi_bench.serving.sse import FIRST_TOKEN_TEXT, ChatStream
from kimi_bench.serving.usage import PromptCount
from tests.faults import (
    BrokenStream,
    CrashAtRepeat,
    CrashBeforeAttach,
    DieAtRequest,
    HangAtRequest,
    spec,
)


def test_a_spec_loads_its_class_with_its_arguments():
    hooks = load_hooks(spec(CrashAtRepeat, repeat=2, rank=1))
    assert isinstance(hooks, CrashAtRepeat) and (hooks.repeat, hooks.rank) == (2, 1)
    assert spec(CrashAtRepeat, repeat=0) == "tests.faults:CrashAtRepeat:repeat=0"
    assert load_hooks(spec(CrashAtRepeat, repeat=0)).rank is None  # type: ignore[attr-defined]
    assert load_hooks("tests.faults:BrokenStream:mode=reset").mode == "reset"  # type: ignore[attr-defined]
    assert load_hooks(None) is NO_FAULTS and load_hooks("") is NO_FAULTS


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("tests.faults:Nothing", "cannot load"),
        ("tests.no_such_module:CrashAtRepeat", "cannot load"),
        ("tests.faults:spec", "is not a FaultHooks class"),
        ("tests.faults:CrashAtRepeat:repeat", "is not key=value"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_option(bad: str, says: str):
    with pytest.raises(ValueError, match=says) as info:
        load_hooks(bad)
    assert str(info.value).startswith(f"--fault-hooks {bad}: ")


def test_the_old_fault_strings_are_not_options_any_more():
    for old in ("rank:1:repeat:1", "producer:3", "malformed"):
        with pytest.raises(ValidationError, match="fault_hooks"):
            MicroOptions(fault_hooks=old)
    with pytest.raises(ValidationError, match="fault"):
        MicroOptions(fault="producer:3")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "hooks",
    [NO_FAULTS, CrashAtRepeat(1, rank=0), CrashBeforeAttach(1), DieAtRequest(3),
     HangAtRequest(2, seconds=5), BrokenStream("malformed")],
)  # fmt: skip
def test_hooks_pickle_as_they_travel_to_workers(hooks: FaultHooks):
    back = pickle.loads(pickle.dumps(hooks))
    assert type(back) is type(hooks) and vars(back) == vars(hooks)


def test_the_seams_do_nothing_by_default_and_fire_only_where_asked():
    NO_FAULTS.on_repeat(None, 0)
    NO_FAULTS.on_repeat(3, 7)
    NO_FAULTS.before_attach(0)
    NO_FAULTS.on_request(0)
    crash = CrashAtRepeat(1, rank=1)
    crash.on_repeat(None, 1)
    crash.on_repeat(1, 0)
    with pytest.raises(RuntimeError, match="injected fault at rank:1, iteration 1"):
        crash.on_repeat(1, 1)
    with pytest.raises(RuntimeError, match="injected fault at producer, iteration 0"):
        CrashAtRepeat(0).on_repeat(None, 0)
    with pytest.raises(RuntimeError, match="before it maps the arena"):
        CrashBeforeAttach(1).before_attach(1)
    CrashBeforeAttach(1).before_attach(0)
    HangAtRequest(2, seconds=600).on_request(1)  # another request: returns at once


@pytest.mark.parametrize("name", ["micro", "serve-ab", "serve"])
def test_the_option_is_hidden_from_help(name: str):
    res = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "--fault" not in res.output


def test_serve_ab_hands_the_spec_on_to_its_emulator_servers(tmp_path: Path):
    fault = spec(DieAtRequest, rid=4)
    shape: dict[str, Any] = {"resolution": (64, 48), "requests": 4}
    made = ServeOptions(fault_hooks=fault, **shape)
    opts = HttpServeOptions.from_options(made, log_dir=None, before_send=None)
    argv = emulator_command("deferred", 8000, opts, tmp_path)
    served = ServeCommandOptions.model_validate_json(Path(argv[-1]).read_text())
    assert (served.fault_hooks, served.arm, served.port) == (fault, "deferred", 8000)
    plain = HttpServeOptions.from_options(ServeOptions(**shape), log_dir=None, before_send=None)
    argv = emulator_command("deferred", 8000, plain, tmp_path)
    assert ServeCommandOptions.model_validate_json(Path(argv[-1]).read_text()).fault_hooks is None


def _run(hooks: FaultHooks) -> tuple[list[str], str | None, BaseException | None]:
    async def main() -> tuple[list[str], str | None, BaseException | None]:
        stream = ChatStream(
            "chatcmpl-t", "m", 3, PromptCount(text=5), decode_interval_s=0.0,
            stop=asyncio.Event(), hooks=hooks,
        )  # fmt: skip
        events: list[str] = []
        try:
            async for event in stream.events():
                events.append(event)
        except ConnectionError as exc:
            return events, stream.outcome, exc
        return events, stream.outcome, None

    return asyncio.run(main())


def _finish(events: list[str]) -> list[str | None]:
    out = []
    for e in events:
        if e.startswith("data: {") and '"finish_reason"' in e:
            out.append(json.loads(e[6:])["choices"][0]["finish_reason"])
    return out


def test_the_stream_seam_shapes_the_answer():
    events, outcome, exc = _run(NO_FAULTS)
    assert outcome == "ok" and exc is None and events[-1] == "data: [DONE]\n\n"
    assert sum(FIRST_TOKEN_TEXT in e for e in events) == 3 and _finish(events)[-1] == "length"
    events, outcome, exc = _run(BrokenStream("no_token"))
    assert outcome == "error" and exc is None and len(events) == 3  # role, stop, [DONE]
    assert _finish(events) == [None, "stop"]
    events, outcome, exc = _run(BrokenStream("malformed"))
    assert outcome == "error" and exc is None and events[-1] == "data: [DONE]\n\n"
    with pytest.raises(json.JSONDecodeError):
        json.loads(events[1][6:])
    events, outcome, exc = _run(BrokenStream("reset"))
    assert outcome == "error" and isinstance(exc, ConnectionResetError) and len(events) == 1
    with pytest.raises(ValueError, match="mode must be one of"):
        BrokenStream("explode")


@pytest.mark.parametrize(
    "argv",
    [
        ["micro", "--synthetic", "1x64x48", "--device", "cpu", "--repeats", "1"],
        ["serve", "--arm", "eager", "--device", "cpu"],
    ],
)
def test_a_command_refuses_a_bad_spec_before_it_starts_anything(argv: list[str], tmp_path: Path):
    if argv[0] == "micro":
        argv = [*argv, "--out", str(tmp_path / "m")]
    res = CliRunner().invoke(app, [*argv, "--fault-hooks", "tests.faults:Nothing"])
    assert res.exit_code == 2, res.output
    assert "--fault-hooks tests.faults:Nothing: cannot load" in res.output
    assert not (tmp_path / "m" / "report.json").exists()
    res = CliRunner().invoke(app, [*argv, "--fault-hooks", "producer:3"])
    assert res.exit_code == 2 and "--fault-hooks" in res.output, res.output
